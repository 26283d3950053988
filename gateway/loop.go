package gateway

import (
	"context"
	"sync"
	"time"
)

// loop runs a gateway task every interval until stopped: the
// controllers kgate runs for clusters without kube-controller-manager.
type loop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoop(interval time.Duration, round func(context.Context)) *loop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{cancel: cancel}
	l.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				round(ctx)
			}
		}
	})
	return l
}

// stop ends the loop and waits for its round in progress.
func (l *loop) stop() {
	if l == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
}
