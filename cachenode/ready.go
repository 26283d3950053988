package cachenode

import (
	"context"
	"errors"
	"time"
)

// ErrStopped is returned by WaitReady when the node stopped first.
var ErrStopped = errors.New("cachenode: stopped before ready")

// readyPoll is how often WaitReady looks at the ranges: readiness is
// their reflectors' state, not an event.
const readyPoll = 10 * time.Millisecond

// WaitReady waits until the node is ready (Ready: running, every range it
// reflects synced). It fails with ctx's error when ctx ends first, and
// with ErrStopped when Run returns first.
func (n *Node) WaitReady(ctx context.Context) error {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for !n.Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stopped:
			return ErrStopped
		case <-t.C:
		}
	}
	return nil
}
