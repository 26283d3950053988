package fairness

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

func rejected(t *testing.T, err error, reason string) {
	t.Helper()
	var r *Rejected
	if !errors.As(err, &r) || r.Reason != reason || r.RetryAfter < 1 {
		t.Fatalf("got %v, want a rejection for %s", err, reason)
	}
}

func TestSystemExempt(t *testing.T) {
	l, _ := newLimiter(t, Config{UserQPS: 1, UserBurst: 1, MaxWatchesPerUser: 1})
	for _, r := range []*Request{
		{User: "admin", Groups: []string{"system:masters"}, Verb: "get"},
		{User: "system:node:n1", Groups: []string{"system:nodes"}, Verb: "watch"},
		{User: "system:kube-scheduler", Verb: "watch"},
		{User: "alice", Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases"},
	} {
		for range 3 {
			if _, err := l.Admit(r); err != nil {
				t.Fatalf("%+v: %v", r, err)
			}
		}
	}
	if system(&Request{User: "alice", Verb: "get", Resource: "pods"}) {
		t.Fatal("alice is no system user")
	}
}

func TestExecuting(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := New(Config{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	done := l.Executing("create")
	l.Executing("get")
	done()
	want := map[string]float64{"mutating": 0, "readOnly": 1}
	for kind, v := range want {
		if got := testutil.ToFloat64(l.inflightKind.WithLabelValues(kind)); got != v {
			t.Fatalf("%s executing: %v, want %v", kind, got, v)
		}
	}
}

func TestUserRate(t *testing.T) {
	l, c := newLimiter(t, Config{UserQPS: 1, UserBurst: 2})
	r := &Request{User: "bob", Verb: "get"}
	for range 2 {
		if _, err := l.Admit(r); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.Admit(r)
	rejected(t, err, ReasonUserRate)
	if _, err := l.Admit(&Request{User: "carol", Verb: "get"}); err != nil {
		t.Fatal("another user must not share bob's bucket:", err)
	}
	c.t = c.t.Add(time.Second)
	if _, err := l.Admit(r); err != nil {
		t.Fatal(err)
	}
}

func TestWatchesPerUser(t *testing.T) {
	l, _ := newLimiter(t, Config{MaxWatchesPerUser: 1})
	r := &Request{User: "bob", Verb: "watch"}
	w, err := l.Admit(r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit(r)
	rejected(t, err, ReasonWatches)
	w.EndWatch()
	w.EndWatch()
	if _, err := l.Admit(r); err != nil {
		t.Fatal(err)
	}
}

func TestListBytes(t *testing.T) {
	l, c := newLimiter(t, Config{ListBytesPerSecond: 1000, ListBytesBurst: 1000, ListMaxWait: 2 * time.Second})
	r := &Request{User: "bob", Verb: "list"}
	tk, err := l.Admit(r)
	if err != nil {
		t.Fatal(err)
	}
	tk.Done("list", 2500) // 1500 in debt: a 1.5s wait
	start := c.t
	if _, err := l.Admit(r); err != nil {
		t.Fatal(err)
	}
	if waited := c.t.Sub(start); waited != 1500*time.Millisecond {
		t.Fatalf("waited %v, want 1.5s", waited)
	}
	tk, _ = l.Admit(r)
	tk.Done("list", 5000) // 5s of debt: over ListMaxWait
	_, err = l.Admit(r)
	rejected(t, err, ReasonListBytes)
	if _, err := l.Admit(&Request{User: "bob", Verb: "get"}); err != nil {
		t.Fatal("a GET does not wait for the list budget:", err)
	}
}
