package publisher

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func connect(t *testing.T, maxPayload int32) *nats.Conn {
	t.Helper()
	if testing.Short() {
		t.Skip("needs NATS: skipped under -short")
	}
	s, err := natsembed.Start(natsembed.Config{MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func next(t *testing.T, sub *nats.Subscription) (event.Event, string) {
	t.Helper()
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	if err := ev.Unmarshal(msg.Data); err != nil {
		t.Fatal(err)
	}
	return ev, msg.Subject
}

func noMessage(t *testing.T, sub *nats.Subscription) {
	t.Helper()
	if msg, err := sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("unexpected message on %s", msg.Subject)
	}
}

func TestEventsAndProgress(t *testing.T) {
	nc := connect(t, 0)
	c := &clock{t: time.Unix(0, 0)}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	p, err := New(Config{NATS: nc, Interval: time.Second, Now: c.now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := nc.SubscribeSync(event.RangeSubjects("pods"))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := nc.SubscribeSync(event.ProgressSubject("pods"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	p.Restart("pods", 10)
	p.Seen("pods", 10)
	sent := []event.Event{
		{Type: event.Added, Range: "pods", Revision: 11, Key: "/registry/pods/a/x", Namespace: "a", Name: "x", Object: []byte("{}"), Labels: map[string]string{"l": "v"}},
		{Type: event.Deleted, Range: "pods", Revision: 12, PrevRangeRevision: 11, Key: "/registry/pods/b/y", Namespace: "b", Name: "y", Object: []byte("{}"), PrevObject: []byte("{ }")},
	}
	for i := range sent {
		p.Event(&sent[i])
	}
	for i, want := range sent {
		got, subj := next(t, evs)
		if !reflect.DeepEqual(got, want) || subj != event.Subject("pods", want.Namespace) {
			t.Fatalf("message %d on %s = %+v, want %+v", i, subj, got, want)
		}
	}

	// busy: no progress; idle without news: no progress
	p.Seen("pods", 15)
	p.ProgressIdle()
	noMessage(t, prog)
	c.add(time.Second)
	p.ProgressIdle()
	got, _ := next(t, prog)
	want := event.Event{Type: event.Progress, Range: "pods", Revision: 15, PrevRangeRevision: 12}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("progress = %+v, want %+v", got, want)
	}
	p.Seen("pods", 16)
	p.ProgressIdle()
	noMessage(t, prog) // a progress went out less than Interval ago
	c.add(time.Second)
	p.ProgressIdle()
	if got, _ := next(t, prog); got.Revision != 16 || got.PrevRangeRevision != 12 {
		t.Fatalf("second progress = %+v", got)
	}
	c.add(time.Second)
	p.ProgressIdle()
	noMessage(t, prog) // seen did not move
	// a restart starts the chain again at the list revision
	p.Restart("pods", 18)
	p.Seen("pods", 20)
	c.add(time.Second)
	p.ProgressIdle()
	if got, _ := next(t, prog); got.Revision != 20 || got.PrevRangeRevision != 18 {
		t.Fatalf("progress after restart = %+v", got)
	}
	if n := counter(t, m.published.WithLabelValues("pods", "event")); n != 2 {
		t.Fatalf("published events = %v", n)
	}
	if n := counter(t, m.published.WithLabelValues("pods", "progress")); n != 3 {
		t.Fatalf("published progress = %v", n)
	}
}

func TestTooLarge(t *testing.T) {
	nc := connect(t, 1024)
	m := NewMetrics(nil)
	p, err := New(Config{NATS: nc, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync(event.RangeSubjects("pods"))
	if err != nil {
		t.Fatal(err)
	}
	p.Event(&event.Event{Type: event.Added, Range: "pods", Revision: 5, Object: make([]byte, 2000)})
	p.Event(&event.Event{Type: event.Added, Range: "pods", Revision: 6, PrevRangeRevision: 5, Object: make([]byte, 20)})
	if got, _ := next(t, sub); got.Revision != 6 || got.PrevRangeRevision != 5 {
		t.Fatalf("after a too large event got %+v", got)
	}
	if n := counter(t, m.errors.WithLabelValues("pods")); n != 1 {
		t.Fatalf("errors = %v", n)
	}
}

func TestConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without NATS succeeded")
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A replica that is not the range's primary publishes nothing but keeps
// its chain; promoted, it continues the chain and announces progress.
func TestQuietReplicaPromoted(t *testing.T) {
	nc := connect(t, 0)
	c := &clock{t: time.Unix(0, 0)}
	p, err := New(Config{NATS: nc, Interval: time.Second, Now: c.now, Metrics: NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := nc.SubscribeSync(event.RangeSubjects("pods"))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := nc.SubscribeSync(event.ProgressSubject("pods"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p.Restart("pods", 10)
	p.SetPrimary("pods", false)
	p.Event(&event.Event{Type: event.Added, Range: "pods", Revision: 11, PrevRangeRevision: 10, Key: "/registry/pods/a/x", Namespace: "a", Name: "x", Object: []byte("{}")})
	p.Seen("pods", 15)
	c.add(2 * time.Second)
	p.ProgressIdle()
	noMessage(t, evs)
	noMessage(t, prog)

	p.SetPrimary("pods", true)
	c.add(2 * time.Second)
	p.ProgressIdle()
	if got, _ := next(t, prog); got.Revision != 15 || got.PrevRangeRevision != 11 {
		t.Fatalf("progress after promotion = %+v, want revision 15 after the event at 11", got)
	}
	p.Event(&event.Event{Type: event.Modified, Range: "pods", Revision: 16, PrevRangeRevision: 11, Key: "/registry/pods/a/x", Namespace: "a", Name: "x", Object: []byte("{}")})
	if got, _ := next(t, evs); got.Revision != 16 {
		t.Fatalf("event after promotion = %+v", got)
	}
}

// A promoted replica announces its chain even when etcd did not move past
// its last event (gateways may have missed it while the old primary
// died), and an idle primary repeats its progress as a heartbeat.
func TestPromotionAnnouncesAndHeartbeats(t *testing.T) {
	nc := connect(t, 0)
	c := &clock{t: time.Unix(0, 0)}
	p, err := New(Config{NATS: nc, Interval: time.Second, Now: c.now, Metrics: NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := nc.SubscribeSync(event.ProgressSubject("pods"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p.Restart("pods", 10)
	p.SetPrimary("pods", false)
	p.Event(&event.Event{Type: event.Added, Range: "pods", Revision: 11, PrevRangeRevision: 10, Key: "/registry/pods/a/x", Namespace: "a", Name: "x", Object: []byte("{}")})
	p.SetPrimary("pods", true)
	p.ProgressIdle() // at once, not after an interval
	if got, _ := next(t, prog); got.Revision != 11 || got.PrevRangeRevision != 11 {
		t.Fatalf("announcement = %+v, want the chain head 11", got)
	}
	c.add(2 * time.Second)
	p.ProgressIdle()
	noMessage(t, prog) // nothing moved, no heartbeat yet
	c.add(heartbeatIntervals * time.Second)
	p.ProgressIdle()
	if got, _ := next(t, prog); got.Revision != 11 || got.PrevRangeRevision != 11 {
		t.Fatalf("heartbeat = %+v", got)
	}
}
