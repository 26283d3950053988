package fairness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time        { return c.t }
func (c *clock) sleep(d time.Duration) { c.t = c.t.Add(d) }
func newLimiter(t *testing.T, cfg Config) (*Limiter, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1000, 0)}
	cfg.Now, cfg.Sleep, cfg.Metrics = c.now, c.sleep, prometheus.NewRegistry()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

var ctx = context.Background()

func cancelled() context.Context {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	return c
}

func rejected(t *testing.T, err error, reason string) {
	t.Helper()
	var r *Rejected
	if !errors.As(err, &r) || r.Reason != reason || r.RetryAfter < 1 {
		t.Fatalf("got %v, want a rejection for %s", err, reason)
	}
}

func TestInflightPerLevel(t *testing.T) {
	l, _ := newLimiter(t, Config{MaxInflight: 2, MaxMutatingInflight: 1})
	// A cancelled context gives up at once when the request would have to
	// queue: admitted means a seat was free.
	gone := cancelled()
	alice := &Request{User: "alice", Verb: "get"}
	a, err := l.Admit(gone, alice)
	if err != nil {
		t.Fatal(err)
	}
	if a.Level.Name != LevelWorkload {
		t.Fatalf("level %q", a.Level.Name)
	}
	if _, err := l.Admit(gone, alice); err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit(gone, alice)
	rejected(t, err, ReasonCancelled)
	// The system level and the mutating pool are separate; watches are
	// not counted.
	sys, err := l.Admit(gone, &Request{User: "admin", Groups: []string{"system:masters"}, Verb: "get"})
	if err != nil {
		t.Fatal(err)
	}
	if sys.Level.Name != LevelSystem {
		t.Fatalf("level %q", sys.Level.Name)
	}
	if _, err := l.Admit(gone, &Request{User: "alice", Verb: "create"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Admit(gone, &Request{User: "alice", Verb: "watch"}); err != nil {
		t.Fatal(err)
	}
	a.Done("get", 0)
	a.Done("get", 0) // a second Done releases nothing
	if _, err := l.Admit(gone, alice); err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit(gone, alice)
	rejected(t, err, ReasonCancelled)
}

func TestUserRate(t *testing.T) {
	l, c := newLimiter(t, Config{UserQPS: 1, UserBurst: 2})
	r := &Request{User: "bob", Verb: "get"}
	for range 2 {
		if _, err := l.Admit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.Admit(ctx, r)
	rejected(t, err, ReasonUserRate)
	if _, err := l.Admit(ctx, &Request{User: "carol", Verb: "get"}); err != nil {
		t.Fatal("another user must not share bob's bucket:", err)
	}
	c.t = c.t.Add(time.Second)
	if _, err := l.Admit(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func TestWatchesPerUser(t *testing.T) {
	l, _ := newLimiter(t, Config{MaxWatchesPerUser: 1})
	r := &Request{User: "bob", Verb: "watch"}
	w, err := l.Admit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit(ctx, r)
	rejected(t, err, ReasonWatches)
	w.EndWatch()
	w.EndWatch()
	if _, err := l.Admit(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func TestListBytes(t *testing.T) {
	l, c := newLimiter(t, Config{ListBytesPerSecond: 1000, ListBytesBurst: 1000, ListMaxWait: 2 * time.Second})
	r := &Request{User: "bob", Verb: "list"}
	tk, err := l.Admit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	tk.Done("list", 2500) // 1500 in debt: a 1.5s wait
	start := c.t
	if _, err := l.Admit(ctx, r); err != nil {
		t.Fatal(err)
	}
	if waited := c.t.Sub(start); waited != 1500*time.Millisecond {
		t.Fatalf("waited %v, want 1.5s", waited)
	}
	tk, _ = l.Admit(ctx, r)
	tk.Done("list", 5000) // 5s of debt: over ListMaxWait
	_, err = l.Admit(ctx, r)
	rejected(t, err, ReasonListBytes)
	if _, err := l.Admit(ctx, &Request{User: "bob", Verb: "get"}); err != nil {
		t.Fatal("a GET does not wait for the list budget:", err)
	}
}
