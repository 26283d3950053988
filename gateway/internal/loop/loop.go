// Package loop runs a task every interval until stopped: the controllers
// a gateway runs for clusters without kube-controller-manager (quota
// recount, ClusterRole aggregation).
package loop

import (
	"context"
	"sync"
	"time"
)

// Loop is a running periodic task.
type Loop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start calls round every interval, in one goroutine, until Stop.
func Start(interval time.Duration, round func(context.Context)) *Loop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Loop{cancel: cancel}
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

// Stop ends the loop and waits for its round in progress. A nil Loop
// (a task that is off) stops at once.
func (l *Loop) Stop() {
	if l == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
}
