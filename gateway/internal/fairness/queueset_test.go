package fairness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// admitted is the outcome of an Admit run in a goroutine.
type admitted struct {
	user string
	t    *Ticket
	err  error
}

// admitAsync admits r in a goroutine and waits until it has either
// returned or blocked (queued); the outcome arrives on out.
func admitAsync(l *Limiter, c context.Context, r *Request, out chan<- admitted) {
	go func() {
		t, err := l.Admit(c, r)
		out <- admitted{r.User, t, err}
	}()
	synctest.Wait()
}

// value is a gauge's or counter's value.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	return d.GetGauge().GetValue() + d.GetCounter().GetValue()
}

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// checkIdle checks a pool holds no seat and no waiter.
func checkIdle(t *testing.T, l *Limiter) {
	t.Helper()
	for name, lv := range l.levels {
		for _, s := range []*queueSet{lv.read, lv.mutating} {
			if s == nil {
				continue
			}
			s.mu.Lock()
			inUse, queued := s.inUse, s.queued
			n := 0
			for _, q := range s.queues {
				n += len(q)
			}
			s.mu.Unlock()
			if inUse != 0 || queued != 0 || n != 0 {
				t.Errorf("level %s: %d seats in use, %d queued (%d in the queues), want none", name, inUse, queued, n)
			}
		}
		if g := value(l.queued.WithLabelValues(name, name)); g != 0 {
			t.Errorf("level %s: apiserver_flowcontrol_current_inqueue_requests %v", name, g)
		}
		if g := value(l.inflight.WithLabelValues(name, name)); g != 0 {
			t.Errorf("level %s: apiserver_flowcontrol_current_executing_requests %v", name, g)
		}
	}
}

// seatsFree checks exactly n seats of the workload read pool are free:
// with a cancelled context, only a request finding a free seat is
// admitted. It gives them back.
func seatsFree(t *testing.T, l *Limiter, n int) {
	t.Helper()
	gone := cancelled()
	var got []*Ticket
	for i := range n + 1 {
		tk, err := l.Admit(gone, &Request{User: "probe", Verb: "get"})
		if i < n && err != nil {
			t.Fatalf("seat %d of %d: %v", i+1, n, err)
		}
		if i == n {
			rejected(t, err, ReasonCancelled)
		}
		if tk != nil {
			got = append(got, tk)
		}
	}
	for _, tk := range got {
		tk.Done("get", 0)
	}
}

// TestFairQueuing: with one seat, a user with 20 requests queued does not
// hold back another user's two: round robin over the queues serves
// those within the first round, not after the 20.
func TestFairQueuing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newLimiter(t, Config{MaxInflight: 1, Queues: 64, HandSize: 8, QueueLengthLimit: 50})
		holder, err := l.Admit(ctx, &Request{User: "holder", Verb: "get"})
		if err != nil {
			t.Fatal(err)
		}
		out := make(chan admitted, 22)
		for range 20 {
			admitAsync(l, ctx, &Request{User: "a", Verb: "get"}, out)
		}
		for range 2 {
			admitAsync(l, ctx, &Request{User: "b", Verb: "get"}, out)
		}
		if q := value(l.queued.WithLabelValues(LevelWorkload, LevelWorkload)); q != 22 {
			t.Fatalf("%v queued, want 22", q)
		}
		// The seat passes from one request to the next.
		holder.Done("get", 0)
		var order []string
		for range 22 {
			a := <-out
			if a.err != nil {
				t.Fatal(a.err)
			}
			synctest.Wait()
			select {
			case b := <-out:
				t.Fatalf("%s admitted while %s holds the only seat", b.user, a.user)
			default:
			}
			order = append(order, a.user)
			a.t.Done("get", 0)
		}
		// a spreads over at most its hand (8 queues), b over 2 others: b
		// is served in the first round of at most 10.
		last := slices.Index(order, "b")
		if i := slices.Index(order[last+1:], "b"); i >= 0 {
			last += 1 + i
		}
		if last >= 10 {
			t.Fatalf("b's second request was dispatched %dth: %s", last+1, strings.Join(order, " "))
		}
		t.Logf("dispatch order: %s", strings.Join(order, " "))
		checkIdle(t, l)
	})
}

func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newLimiter(t, Config{MaxInflight: 1, Queues: 2, HandSize: 1, QueueLengthLimit: 2})
		holder, err := l.Admit(ctx, &Request{User: "a", Verb: "get"})
		if err != nil {
			t.Fatal(err)
		}
		out := make(chan admitted, 2)
		for range 2 {
			admitAsync(l, ctx, &Request{User: "a", Verb: "get"}, out)
		}
		_, err = l.Admit(ctx, &Request{User: "a", Verb: "get"})
		rejected(t, err, ReasonQueueFull)
		var r *Rejected
		if errors.As(err, &r); r.Level == nil || r.Level.Name != LevelWorkload {
			t.Fatalf("rejection level %+v", r.Level)
		}
		if n := value(l.rejected.WithLabelValues(ReasonQueueFull)); n != 1 {
			t.Fatalf("kgate_gateway_rejected_total{reason=queue_full} %v", n)
		}
		if n := value(l.apfRejected.WithLabelValues(LevelWorkload, LevelWorkload, "queue-full")); n != 1 {
			t.Fatalf("apiserver_flowcontrol_rejected_requests_total{reason=queue-full} %v", n)
		}
		holder.Done("get", 0)
		for range 2 {
			a := <-out
			if a.err != nil {
				t.Fatal(a.err)
			}
			a.t.Done("get", 0)
		}
		checkIdle(t, l)
		seatsFree(t, l, 1)
	})
}

func TestQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The limiter's wait timer is time.After: in the bubble it fires
		// once every goroutine is blocked, 15 s later by the fake clock.
		l, err := New(Config{MaxInflight: 1, Metrics: newRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		holder, err := l.Admit(ctx, &Request{User: "a", Verb: "get"})
		if err != nil {
			t.Fatal(err)
		}
		out := make(chan admitted, 1)
		start := time.Now()
		admitAsync(l, ctx, &Request{User: "b", Verb: "get"}, out)
		a := <-out
		rejected(t, a.err, ReasonTimeout)
		if waited := time.Since(start); waited != DefaultMaxWait {
			t.Fatalf("waited %v, want %v", waited, DefaultMaxWait)
		}
		// The holder seated at once (0 s), b gave up after 15 s.
		for execute, want := range map[string]float64{"true": 0, "false": DefaultMaxWait.Seconds()} {
			var m dto.Metric
			if err := l.wait.WithLabelValues(LevelWorkload, LevelWorkload, execute).(prometheus.Metric).Write(&m); err != nil {
				t.Fatal(err)
			}
			if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != want {
				t.Fatalf("apiserver_flowcontrol_request_wait_duration_seconds{execute=%s}: %d samples, sum %v, want 1 of %v", execute, h.GetSampleCount(), h.GetSampleSum(), want)
			}
		}
		holder.Done("get", 0)
		checkIdle(t, l)
		seatsFree(t, l, 1)
	})
}

func TestQueueCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newLimiter(t, Config{MaxInflight: 2})
		var holders []*Ticket
		for range 2 {
			h, err := l.Admit(ctx, &Request{User: "a", Verb: "get"})
			if err != nil {
				t.Fatal(err)
			}
			holders = append(holders, h)
		}
		out := make(chan admitted, 3)
		var cancels []context.CancelFunc
		for _, u := range []string{"b", "c", "d"} {
			c, cancel := context.WithCancel(ctx)
			cancels = append(cancels, cancel)
			admitAsync(l, c, &Request{User: u, Verb: "get"}, out)
		}
		cancels[0]()
		cancels[2]()
		for range 2 {
			a := <-out
			rejected(t, a.err, ReasonCancelled)
			if a.user == "c" {
				t.Fatal("c was not cancelled")
			}
		}
		if q := value(l.queued.WithLabelValues(LevelWorkload, LevelWorkload)); q != 1 {
			t.Fatalf("%v queued, want 1", q)
		}
		holders[0].Done("get", 0)
		a := <-out
		if a.err != nil || a.user != "c" {
			t.Fatalf("%s: %v", a.user, a.err)
		}
		cancels[1]() // too late: c holds its seat
		holders[1].Done("get", 0)
		seatsFree(t, l, 1)
		a.t.Done("get", 0)
		checkIdle(t, l)
		seatsFree(t, l, 2)
	})
}

// TestQueueStress admits, finishes and cancels at random from many
// goroutines: the pool never has more than its limit in flight, and
// ends with every seat free and every queue empty.
func TestQueueStress(t *testing.T) {
	const limit = 3
	l, err := New(Config{MaxInflight: limit, MaxMutatingInflight: 1, Queues: 4, HandSize: 2, QueueLengthLimit: 1, MaxWait: 2 * time.Millisecond, Metrics: newRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	var inflight, mutating atomic.Int32
	reasons := map[string]*atomic.Int32{ReasonQueueFull: {}, ReasonTimeout: {}, ReasonCancelled: {}}
	var admittedN atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				verb, n, max := "get", &inflight, int32(limit)
				if rng.IntN(4) == 0 {
					verb, n, max = "create", &mutating, 1
				}
				c, cancel := context.WithCancel(ctx)
				if rng.IntN(3) == 0 {
					spins := rng.IntN(50)
					go func() {
						for range spins {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				tk, err := l.Admit(c, &Request{User: []string{"a", "b", "c", "d", "e"}[rng.IntN(5)], Verb: verb})
				if err != nil {
					var r *Rejected
					if !errors.As(err, &r) || reasons[r.Reason] == nil {
						t.Errorf("unexpected rejection %v", err)
					} else {
						reasons[r.Reason].Add(1)
					}
					cancel()
					continue
				}
				admittedN.Add(1)
				if v := n.Add(1); v > max {
					t.Errorf("%d %s requests in flight, limit %d", v, verb, max)
				}
				for range rng.IntN(20) {
					runtime.Gosched()
				}
				n.Add(-1)
				tk.Done(verb, 0)
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("admitted %d; rejected queue_full %d, time_out %d, cancelled %d", admittedN.Load(),
		reasons[ReasonQueueFull].Load(), reasons[ReasonTimeout].Load(), reasons[ReasonCancelled].Load())
	checkIdle(t, l)
	seatsFree(t, l, limit)
}

func TestDeal(t *testing.T) {
	s := newQueueSet(1, 64, 8, 1, nil)
	seen := map[string]bool{}
	for i := range 200 {
		flow := fmt.Sprintf("user-%d", i)
		var hand, again []int
		s.deal(flowHash(flow), func(q int) { hand = append(hand, q) })
		s.deal(flowHash(flow), func(q int) { again = append(again, q) })
		if !slices.Equal(hand, again) {
			t.Fatalf("%s: hands %v and %v", flow, hand, again)
		}
		sorted := slices.Clone(hand)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != 8 || sorted[0] < 0 || sorted[len(sorted)-1] >= 64 {
			t.Fatalf("%s: hand %v is not 8 distinct queues of 64", flow, hand)
		}
		seen[fmt.Sprint(sorted)] = true
	}
	if len(seen) < 190 {
		t.Fatalf("only %d distinct hands for 200 users", len(seen))
	}
	// Every queue can be dealt when the hand is the whole deck.
	s = newQueueSet(1, 5, 5, 1, nil)
	var all []int
	s.deal(flowHash("x"), func(q int) { all = append(all, q) })
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("full hand %v", all)
	}
}

func TestQueueConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Queues: -1}, {HandSize: -1}, {QueueLengthLimit: -1}, {MaxWait: -time.Second},
		{Queues: 4, HandSize: 5}, {Queues: 1000, HandSize: 60},
	} {
		cfg.Metrics = newRegistry()
		if _, err := New(cfg); err == nil || !strings.HasPrefix(err.Error(), "cannot make fairness limiter: ") {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	// Small queue counts default the hand to fit.
	if _, err := New(Config{Queues: 4, Metrics: newRegistry()}); err != nil {
		t.Fatal(err)
	}
	// Header UIDs: stable, distinct, UUID-shaped.
	l1, _ := newLimiter(t, Config{})
	l2, _ := newLimiter(t, Config{})
	s1, w1, w2 := l1.levels[LevelSystem], l1.levels[LevelWorkload], l2.levels[LevelWorkload]
	if w1.UID != w2.UID || w1.FlowSchemaUID != w2.FlowSchemaUID || w1.UID == s1.UID || w1.UID == w1.FlowSchemaUID {
		t.Fatalf("UIDs: %+v %+v %+v", s1.PriorityLevel, w1.PriorityLevel, w2.PriorityLevel)
	}
	if _, err := uuid.Parse(w1.UID); err != nil {
		t.Fatal(err)
	}
}
