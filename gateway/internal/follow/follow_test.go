package follow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/storage/storagetest"
)

// recorder is a pass that reads etcd's revision and counts itself.
type recorder struct {
	mu     sync.Mutex
	revs   []int64
	fail   int           // passes still to fail
	next   time.Duration // asked of Run after each pass
	asked  []string      // keys Match was asked about
	called chan struct{}
}

func (r *recorder) passes() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.revs)
}

func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	storagetest.CheckGoroutines(t)
	cli := storagetest.StartEtcd(t)
	ctx := t.Context()
	r := &recorder{}
	changed := make(chan struct{})
	var changedMu sync.Mutex
	cfg := Config{
		Name: "test", Etcd: cli, Backoff: 10 * time.Millisecond, Logger: storagetest.Logger(t),
		Prefixes: []Prefix{
			{Key: "/a/"},
			{Key: "/b/", KeysOnly: true, Match: func(key string) bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.asked = append(r.asked, key)
				return key != "/b/ignored"
			}},
		},
		Changed: func() <-chan struct{} {
			changedMu.Lock()
			defer changedMu.Unlock()
			return changed
		},
	}
	pass := func(ctx context.Context) (int64, time.Duration, error) {
		resp, err := cli.Get(ctx, "/")
		if err != nil {
			return 0, 0, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail > 0 {
			r.fail--
			return 0, 0, errors.New("failing on purpose")
		}
		r.revs = append(r.revs, resp.Header.Revision)
		return resp.Header.Revision, r.next, nil
	}
	rctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { Run(rctx, cfg, pass) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	put := func(key string) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, key, "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	// passedAt waits for a pass that read rev or later and returns how
	// many passes there have been.
	passedAt := func(what string, rev int64) int {
		t.Helper()
		var n int
		storagetest.Eventually(t, 10*time.Second, what, func() error {
			revs := r.passes()
			n = len(revs)
			if n == 0 || revs[n-1] < rev {
				return fmt.Errorf("last pass at %v, want %d", revs, rev)
			}
			return nil
		})
		return n
	}

	n := passedAt("the first pass", 1)
	n2 := passedAt("a change under /a/", put("/a/x"))
	if n2 != n+1 {
		t.Errorf("%d passes for one change, want 1", n2-n)
	}

	// A change that Match turns down wakes no pass: once Match has seen
	// it, a matching change makes exactly one more pass.
	put("/b/ignored")
	storagetest.Eventually(t, 10*time.Second, "Match asked about /b/ignored", func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !slices.Contains(r.asked, "/b/ignored") {
			return errors.New("not yet")
		}
		return nil
	})
	n3 := passedAt("a matching change under /b/", put("/b/y"))
	if n3 != n2+1 {
		t.Errorf("%d passes after an ignored and a matching change, want 1", n3-n2)
	}

	// Changed wakes a pass.
	changedMu.Lock()
	close(changed)
	changed = make(chan struct{})
	changedMu.Unlock()
	storagetest.Eventually(t, 10*time.Second, "a pass after Changed", func() error {
		if len(r.passes()) <= n3 {
			return errors.New("not yet")
		}
		return nil
	})

	// A failing pass starts again, and a pass asking for another soon
	// gets it with no change.
	r.mu.Lock()
	r.fail, r.next = 2, 5*time.Millisecond
	r.mu.Unlock()
	rev := put("/a/z")
	n4 := passedAt("a pass after two failed ones", rev)
	storagetest.Eventually(t, 10*time.Second, "passes asked for by the last one", func() error {
		if len(r.passes()) < n4+3 {
			return errors.New("not yet")
		}
		return nil
	})
}

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		resync, next, want time.Duration
	}{
		{0, 0, 0},
		{time.Minute, 0, time.Minute},
		{0, time.Second, time.Second},
		{time.Minute, time.Second, time.Second},
		{time.Second, time.Minute, time.Second},
		{-time.Second, 0, 0},
	} {
		if got := delay(tc.resync, tc.next); got != tc.want {
			t.Errorf("delay(%v, %v) = %v, want %v", tc.resync, tc.next, got, tc.want)
		}
	}
}
