package cachenode_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/storagetest"
)

// heldTable is a range table whose first read blocks until released: it
// holds a starting node between "running" and its first placement.
type heldTable struct {
	*ranges.Table
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *heldTable) Current() *ranges.Table {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return h.Table
}

// TestNotReadyBeforePlaced: a node that runs but has not yet started the
// reflectors of its ranges is not ready. (It once was, with no reflector
// to wait for: a test that wrote right after WaitReady lost the events
// written before the reflector's list — "received 124 of 126 events".)
func TestNotReadyBeforePlaced(t *testing.T) {
	storagetest.CheckGoroutines(t)
	e := cachenodetest.Start(t)
	held := &heldTable{Table: e.Ranges, entered: make(chan struct{}), release: make(chan struct{})}
	n, err := cachenode.New(cachenode.Config{Etcd: e.Etcd, NATS: e.NATS, Registry: e.Registry, Codec: e.Codec, Ranges: held})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-held.entered:
	case <-ctx.Done():
		t.Fatal("Run never read the range table")
	}
	if n.Ready() {
		t.Error("ready before any reflector was started")
	}
	close(held.release)
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	st := n.Status()
	if len(st) != len(e.Ranges.All()) {
		t.Fatalf("ready with %d ranges reflected, want %d", len(st), len(e.Ranges.All()))
	}
	for _, s := range st {
		if !s.Ready {
			t.Errorf("ready with range %s not synced", s.ID)
		}
	}
}
