package publisher

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/storage/storagetest"
	"github.com/prometheus/client_golang/prometheus"
)

// asks records the progress requests a publisher passes to reflectors.
type asks struct {
	mu  sync.Mutex
	ids []string
}

func (a *asks) ask(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, id)
}

func (a *asks) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

func TestRequest(t *testing.T) {
	nc := connect(t, 0)
	c := &clock{t: time.Unix(0, 0)}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	a := &asks{}
	p, err := New(Config{NATS: nc, Interval: time.Second, Now: c.now, Metrics: m, AskProgress: a.ask})
	if err != nil {
		t.Fatal(err)
	}
	// Events and progress of the range on one subscription, in the order
	// they were published.
	all, err := nc.SubscribeSync("kgate.*.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	expect := func(want event.Event) {
		t.Helper()
		got, _ := next(t, all)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("next message = %+v, want %+v", got, want)
		}
	}
	progress := func(rev, prev int64) event.Event {
		return event.Event{Type: event.Progress, Range: "pods", Revision: rev, PrevRangeRevision: prev}
	}
	ev := func(rev, prev int64, idx, count uint32) event.Event {
		return event.Event{Type: event.Modified, Range: "pods", Revision: rev, PrevRangeRevision: prev, Index: idx, Count: count,
			Key: "/registry/pods/a/x", Namespace: "a", Name: "x", Object: []byte("{}")}
	}

	p.Restart("pods", 10)
	p.Seen("pods", 10)
	e11 := ev(11, 10, 0, 0)
	p.Event(&e11)
	expect(e11)

	// Not seen yet: the reflector is asked, the answer goes out with Seen.
	p.Request("pods", 15)
	if got := a.got(); !reflect.DeepEqual(got, []string{"pods"}) {
		t.Fatalf("asked reflectors %v, want [pods]", got)
	}
	p.Seen("pods", 14) // an older notification: no answer yet
	p.Seen("pods", 16)
	expect(progress(16, 11))

	// Seen: answered at once, without asking the reflector; requests of
	// other gateways for the same revision within a moment share it.
	c.add(time.Millisecond)
	p.Request("pods", 12)
	p.Request("pods", 16)
	c.add(answerWithin)
	p.Request("pods", 16) // asked again later: the answer may have been lost
	expect(progress(16, 11))
	if got := a.got(); len(got) != 1 {
		t.Fatalf("asked reflectors %v, want only the first request", got)
	}

	// A transaction half published is no revision seen: the request waits
	// for its last event, which answers it.
	e20a, e20b := ev(20, 11, 0, 2), ev(20, 11, 1, 2)
	p.Event(&e20a)
	p.Request("pods", 20)
	p.Event(&e20b)
	p.Seen("pods", 20)
	e21 := ev(21, 20, 0, 0)
	p.Event(&e21)
	expect(e20a)
	expect(e20b)
	expect(e21) // no progress in between

	// A request never reached (a revision etcd has not made) is forgotten
	// after an interval instead of holding back the answers to later ones.
	p.Request("pods", 1000)
	c.add(time.Second)
	p.ProgressIdle() // forgets it (and beats: the range has been idle)
	expect(progress(21, 21))
	p.Request("pods", 25)
	p.Seen("pods", 25)
	expect(progress(25, 21))

	// A replica and a node that does not reflect the range stay silent.
	p.SetPrimary("pods", false)
	p.Request("pods", 26)
	p.Request("events", 26)
	p.Seen("pods", 26)
	p.SetPrimary("pods", true)
	e27 := ev(27, 21, 0, 0)
	p.Event(&e27)
	expect(e27)
	if n := counter(t, m.requests.WithLabelValues("pods")); n != 7 {
		t.Fatalf("requests handled = %v, want 7", n)
	}
}

// Run answers the progress requests gateways publish on NATS.
func TestRunAnswersRequests(t *testing.T) {
	nc := connect(t, 0)
	a := &asks{}
	p, err := New(Config{NATS: nc, Interval: time.Hour, AskProgress: a.ask})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := nc.SubscribeSync(event.ProgressSubject("pods"))
	if err != nil {
		t.Fatal(err)
	}
	p.Restart("pods", 10)
	p.Seen("pods", 12)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// Run subscribes when it starts: ask until the answer comes.
	var got event.Event
	storagetest.Eventually(t, 10*time.Second, "a progress request answered", func() error {
		if err := nc.Publish(event.ProgressRequestSubject("pods"), event.AppendProgressRequest(nil, 12)); err != nil {
			t.Fatal(err)
		}
		msg, err := prog.NextMsg(time.Millisecond)
		if err != nil {
			return err
		}
		return got.Unmarshal(msg.Data)
	})
	if got.Revision != 12 || got.PrevRangeRevision != 10 {
		t.Fatalf("answer %+v, want progress through 12 after 10", got)
	}
	if got := a.got(); len(got) != 0 {
		t.Fatalf("asked reflectors %v for a revision already seen", got)
	}
}
