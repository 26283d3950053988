package storagetest

import (
	"context"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchFreezer is a fault injector around a real etcd client's Watcher:
// while frozen, watches deliver nothing and progress requests go
// unanswered, as over a stuck watch stream; thawed, everything passes
// through (responses held while frozen come late, in order).
type WatchFreezer struct {
	clientv3.Watcher
	mu      sync.Mutex
	thawed  chan struct{} // closed while not frozen
	watches atomic.Int32
}

// FreezeWatches installs a WatchFreezer in c (thawed) and returns it.
func FreezeWatches(c *clientv3.Client) *WatchFreezer {
	f := &WatchFreezer{Watcher: c.Watcher, thawed: make(chan struct{})}
	close(f.thawed)
	c.Watcher = f
	return f
}

// Freeze stops deliveries.
func (f *WatchFreezer) Freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
		f.thawed = make(chan struct{})
	default: // already frozen
	}
}

// Thaw resumes deliveries.
func (f *WatchFreezer) Thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

// Watches is the number of Watch calls so far.
func (f *WatchFreezer) Watches() int { return int(f.watches.Load()) }

func (f *WatchFreezer) gate() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.thawed
}

// Watch implements clientv3.Watcher.
func (f *WatchFreezer) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	f.watches.Add(1)
	in := f.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			select {
			case <-f.gate():
			case <-ctx.Done():
				return
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// RequestProgress implements clientv3.Watcher: swallowed while frozen.
func (f *WatchFreezer) RequestProgress(ctx context.Context) error {
	select {
	case <-f.gate():
		return f.Watcher.RequestProgress(ctx)
	default:
		return nil
	}
}
