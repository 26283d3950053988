package watchhub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kgate/kgate/cachenode/event"
)

// primary stands in for the primaries of a merge's quiet ranges: it
// answers progress requests, and nothing else publishes progress, so
// events of the busy range reach the merge's client only through the
// requests.
type primary struct {
	t   *testing.T
	nc  *nats.Conn
	win multiWindow

	mu       sync.Mutex
	requests []string // "range rev", in the order received
	// before, when set, runs for a request before the answer: it may
	// publish events the range made before the revision asked for.
	before func(rangeID string, rev int64)
	// answer publishes the range's progress through rev; false leaves the
	// request unanswered (the range moves on by other means).
	answer bool
}

func (p *primary) start() {
	sub, err := p.nc.Subscribe(event.ProgressRequestSubjects, func(m *nats.Msg) {
		id := event.RangeOfProgressRequest(m.Subject)
		rev, err := event.ParseProgressRequest(m.Data)
		if err != nil || id == "" {
			p.t.Errorf("malformed progress request %q on %s", m.Data, m.Subject)
			return
		}
		p.mu.Lock()
		p.requests = append(p.requests, fmt.Sprintf("%s %d", id, rev))
		before, answer := p.before, p.answer
		p.mu.Unlock()
		if before != nil {
			before(id, rev)
		}
		if !answer {
			return
		}
		w := p.win[id]
		w.mu.Lock()
		last := w.head
		if rev > w.head {
			w.head = rev // etcd is at rev at least: the range saw it, with no event
		}
		w.mu.Unlock()
		pr := event.Event{Type: event.Progress, Range: id, Revision: rev, PrevRangeRevision: last}
		if err := p.nc.Publish(event.ProgressSubject(id), pr.Marshal()); err != nil {
			p.t.Error(err)
		}
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func (p *primary) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// publishOn adds ev to its range's window and publishes it.
func publishOn(t *testing.T, nc *nats.Conn, win multiWindow, ev event.Event) {
	t.Helper()
	win[ev.Range].add(ev)
	if err := nc.Publish(event.Subject(ev.Range, ev.Namespace), ev.Marshal()); err != nil {
		t.Fatal(err)
	}
}

func newAskHub(t *testing.T, start int64) (*Hub, *nats.Conn, multiWindow) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts NATS")
	}
	nc := startNATS(t)
	win := multiWindow{"busy": {head: start, oldest: start}, "quiet": {head: start, oldest: start}}
	hub, err := New(Config{NATS: nc, Source: win, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close() })
	return hub, nc, win
}

func modified(rangeID, ns, name string, rev, prevRange, prevSubject int64, color string) event.Event {
	return event.Event{Type: event.Modified, Range: rangeID, Revision: rev, PrevRangeRevision: prevRange, PrevSubjectRevision: prevSubject,
		Key: ns + "/" + name, Namespace: ns, Name: name, Object: []byte(fmt.Sprintf(`{"rev":%d}`, rev)),
		Labels: map[string]string{"color": color}, PrevObject: []byte(`{}`), PrevLabels: map[string]string{"color": color}}
}

// A merged watch releases each event of a busy range as soon as the quiet
// range answers a progress request for its revision: with no periodic
// progress at all, every event arrives, in order, one request each.
func TestMergedWatchAsksQuietRange(t *testing.T) {
	const start = 100
	hub, nc, win := newAskHub(t, start)
	p := &primary{t: t, nc: nc, win: win, answer: true}
	p.start()
	s, err := hub.WatchRanges([]string{"busy", "quiet"}, start, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const n = 50
	prev := int64(start)
	var want []string
	for i := range n {
		rev := int64(start + 2*(i+1)) // the quiet range's revisions lie in between
		publishOn(t, nc, win, modified("busy", "a", "o", rev, prev, prev, "red"))
		prev = rev
		d, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("event %d of %d (revision %d) not delivered: %v; requests %v", i, n, rev, err, p.asked())
		}
		if d.Type != Modified || d.Rev != rev {
			t.Fatalf("event %d: got %s at %d, want MODIFIED at %d", i, d.Type, d.Rev, rev)
		}
		want = append(want, fmt.Sprintf("quiet %d", rev))
	}
	// Every event was held until the quiet range answered for exactly its
	// revision; an answer that was slow to come may have been asked for
	// again, never for another revision.
	got := p.asked()
	j := 0
	for _, r := range got {
		for j < len(want) && r != want[j] {
			j++
		}
		if j == len(want) {
			t.Fatalf("requests %v: %q is not one of %v in order", got, r, want)
		}
	}
	if len(got) < n {
		t.Fatalf("%d requests for %d held events", len(got), n)
	}
	if l := s.Last(); l < prev {
		t.Errorf("Last = %d after every event up to %d", l, prev)
	}
}

// The quiet range turns out not to be quiet: before it answers for
// revision R, an event it made at R-1 is still on its way. The merge must
// hand that event out first: the one order across ranges holds.
func TestMergedWatchOrderWhenAskedRangeHadAnEvent(t *testing.T) {
	const start = 100
	hub, nc, win := newAskHub(t, start)
	p := &primary{t: t, nc: nc, win: win, answer: true}
	quietLast := int64(start)
	p.before = func(id string, rev int64) {
		if id != "quiet" || rev-1 <= quietLast {
			return
		}
		publishOn(t, nc, win, modified("quiet", "b", "q", rev-1, quietLast, quietLast, "blue"))
		quietLast = rev - 1
	}
	p.start()
	s, err := hub.WatchRanges([]string{"busy", "quiet"}, start, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const n = 20
	prev := int64(start)
	for i := range n {
		rev := int64(start + 3*(i+1))
		publishOn(t, nc, win, modified("busy", "a", "o", rev, prev, prev, "red"))
		prev = rev
		for _, want := range []struct {
			rng string
			rev int64
		}{{"quiet", rev - 1}, {"busy", rev}} {
			d, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if d.Event.Range != want.rng || d.Rev != want.rev {
				t.Fatalf("round %d: got %s's event at %d, want %s's at %d", i, d.Event.Range, d.Rev, want.rng, want.rev)
			}
		}
	}
}

// A watch whose filter drops the quiet range's events learns that the
// range moved past a held event's revision from the feed itself, which
// otherwise keeps quiet about the events it drops for a watcher.
func TestMergedWatchFilteredRangeMovesPast(t *testing.T) {
	const start = 100
	hub, nc, win := newAskHub(t, start)
	p := &primary{t: t, nc: nc, win: win, answer: false}
	quietLast := int64(start)
	p.before = func(id string, rev int64) {
		if id != "quiet" || rev+1 <= quietLast {
			return
		}
		// No progress: an event after rev that the filter drops.
		publishOn(t, nc, win, modified("quiet", "b", "q", rev+1, quietLast, quietLast, "blue"))
		quietLast = rev + 1
	}
	p.start()
	red, err := labels.Parse("color=red")
	if err != nil {
		t.Fatal(err)
	}
	s, err := hub.WatchRanges([]string{"busy", "quiet"}, start, Filter{Labels: red})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prev := int64(start)
	for i := range 20 {
		rev := int64(start + 3*(i+1))
		publishOn(t, nc, win, modified("busy", "a", "o", rev, prev, prev, "red"))
		prev = rev
		d, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if d.Event.Range != "busy" || d.Rev != rev {
			t.Fatalf("event %d: got %s's at %d, want busy's at %d", i, d.Event.Range, d.Rev, rev)
		}
	}
}
