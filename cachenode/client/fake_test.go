package client_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/internal/readapi"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/cachenode/internal/window"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// fakeRange is a range fed by the test instead of a reflector.
type fakeRange struct {
	rng   *ranges.Range
	st    *store.Store
	win   *window.Ring
	ready atomic.Bool
	// waiting, when set, is signalled each time WaitFor starts waiting
	// for a revision the range has not reached.
	waiting chan struct{}
}

func newFakeRange(t testing.TB, rng *ranges.Range, rev int64) *fakeRange {
	win, err := window.New(window.Config{MaxEvents: 1000}, rev)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRange{rng: rng, st: store.New(rev), win: win}
	f.ready.Store(true)
	return f
}

func toProto(json []byte) ([]byte, error) { return append([]byte("pb:"), json...), nil }

func podEntry(ns, name string, rev int64, app, phase string) *store.Entry {
	key := "/registry/pods/" + ns + "/" + name
	return store.NewEntry(key, ns, name, rev, labels.Set{"app": app},
		fields.Set{"metadata.name": name, "metadata.namespace": ns, "status.phase": phase},
		fmt.Appendf(nil, `{"kind":"Pod","metadata":{"name":%q,"namespace":%q,"resourceVersion":"%d"}}`, name, ns, rev), nil, toProto)
}

func (f *fakeRange) put(e *store.Entry) {
	prev, _ := f.st.Get(e.Key)
	typ := event.Added
	var pj []byte
	if prev != nil {
		typ, pj = event.Modified, prev.JSON
	}
	f.win.Append(event.Event{Type: typ, Range: f.rng.ID, Revision: e.ModRevision, Key: e.Key, Namespace: e.Namespace, Name: e.Name,
		Object: e.JSON, Labels: e.Labels, Fields: e.Fields, PrevObject: pj}, prev)
	f.st.Put(e, e.ModRevision)
}

func (f *fakeRange) del(key string, rev int64) {
	prev, _ := f.st.Get(key)
	f.win.Append(event.Event{Type: event.Deleted, Range: f.rng.ID, Revision: rev, Key: key, Object: prev.JSON, PrevObject: prev.JSON}, prev)
	f.st.Delete(key, rev)
}

func (f *fakeRange) Range() *ranges.Range { return f.rng }
func (f *fakeRange) Ready() bool          { return f.ready.Load() }
func (f *fakeRange) Seen() int64          { return f.st.Revision() }

func (f *fakeRange) WaitFor(ctx context.Context, rev int64) error {
	if f.waiting != nil && f.st.Revision() < rev {
		select {
		case f.waiting <- struct{}{}:
		default:
		}
	}
	for f.st.Revision() < rev {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

func (f *fakeRange) Snapshot() (*store.Snapshot, error) { return f.st.Snapshot(), nil }

func (f *fakeRange) At(rev int64) (*store.Snapshot, error) {
	snap := f.st.Snapshot()
	if rev > snap.Revision {
		return nil, storage.ErrRevisionTooLarge
	}
	changes, err := f.win.Changes(rev, snap.Revision, nil, 0)
	if err != nil {
		return nil, err
	}
	return snap.Rewind(rev, changes), nil
}

func (f *fakeRange) Since(rev int64, dst []*window.Item, maxBytes int64) ([]*window.Item, int64, error) {
	return f.win.Since(rev, dst, maxBytes)
}

// serve runs a read API over ranges and returns a client of it.
func serve(t testing.TB, wait time.Duration, rs ...readapi.Range) *client.Client {
	t.Helper()
	return serveTLS(t, wait, nil, nil, rs...)
}

// serveTLS is serve with the read API on srvTLS and the client on cliTLS
// (nil: plain HTTP).
func serveTLS(t testing.TB, wait time.Duration, srvTLS, cliTLS *tls.Config, rs ...readapi.Range) *client.Client {
	t.Helper()
	m := readapi.Map{}
	for _, r := range rs {
		m[r.Range().ID] = r
	}
	srv, err := readapi.New(readapi.Config{Listen: "127.0.0.1:0", Ranges: m, WaitTimeout: wait, TLS: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Run(ctx) }()
	c, err := client.New(client.Config{Addr: srv.Addr(), Timeout: 5 * time.Second, TLS: cliTLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return c
}

func podsRange(t testing.TB) (*ranges.Range, *ranges.Table) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	table, err := ranges.Default(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := table.ByID("pods")
	return r, table
}
