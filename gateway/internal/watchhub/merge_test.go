package watchhub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/event"
)

// split assigns each revision of a one-range history to range r1 or r2
// and rebuilds the chains per range, as two reflectors would.
func split(rnd *rand.Rand, all []event.Event, start int64) map[string][]event.Event {
	out := map[string][]event.Event{}
	last := map[string]int64{"r1": start, "r2": start}
	var cur string
	for i := range all {
		ev := all[i]
		if ev.Index == 0 {
			cur = []string{"r1", "r2"}[rnd.IntN(2)]
		}
		ev.Range = cur
		ev.PrevRangeRevision = last[cur]
		if ev.Last() {
			last[cur] = ev.Revision
		}
		out[cur] = append(out[cur], ev)
	}
	return out
}

// multiWindow serves a window per range.
type multiWindow map[string]*window

func (m multiWindow) Events(ctx context.Context, rangeID string, since int64) ([]event.Event, int64, error) {
	return m[rangeID].Events(ctx, rangeID, since)
}

func TestMergedWatchKeepsRevisionOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS")
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	const start = 100
	all := history(rnd, start, 300)
	byRange := split(rnd, all, start)
	wins := multiWindow{"r1": {head: start, oldest: start}, "r2": {head: start, oldest: start}}
	nc := startNATS(t)
	hub, err := New(Config{NATS: nc, Source: wins, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	s, err := hub.WatchRanges([]string{"r1", "r2"}, start, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Publish in global order, dropping some messages; each range sends
	// progress when it is idle, as cache nodes do.
	last := map[string]int64{}
	for i := range all {
		rng := ""
		for r, evs := range byRange {
			for _, ev := range evs {
				if ev.Revision == all[i].Revision && ev.Index == all[i].Index {
					rng = r
					wins[r].add(ev)
					if rnd.IntN(10) > 0 {
						_ = nc.Publish(event.Subject(r, ev.Namespace), ev.Marshal())
					}
					last[r] = ev.Revision
				}
			}
		}
		if rng == "" {
			t.Fatal("event not found in its range")
		}
	}
	head := all[len(all)-1].Revision
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				for r := range wins {
					pr := event.Event{Type: event.Progress, Range: r, Revision: head + 1, PrevRangeRevision: last[r]}
					_ = nc.Publish(event.ProgressSubject(r), pr.Marshal())
				}
			}
		}
	}()

	want := expected(all, start, Filter{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var prevRev int64
	ready := false // every other event is taken with Ready when it has one
	for i := range want {
		d, ok := Delivery{}, false
		if ready {
			d, ok = s.Ready()
		}
		ready = !ready
		if !ok {
			var err error
			if d, err = s.Next(ctx); err != nil {
				t.Fatalf("after %d of %d events: %v", i, len(want), err)
			}
		}
		got := fmt.Sprintf("%s %d.%d %s", d.Type, d.Event.Revision, d.Event.Index, d.Event.Key)
		if d.Event.Revision < prevRev {
			t.Fatalf("event %d at revision %d after %d: out of order", i, d.Event.Revision, prevRev)
		}
		prevRev = d.Event.Revision
		if got != want[i] {
			t.Fatalf("event %d: got %q, want %q", i, got, want[i])
		}
	}
	if l := s.Last(); l < all[len(all)-1].Revision {
		t.Errorf("Last = %d after every event up to %d", l, all[len(all)-1].Revision)
	}
	// The ranges' progress (head+1, with no event) reaches Last once asked
	// for: an idle merge does not follow it by itself.
	m, ok := s.(*Merged)
	if !ok {
		t.Fatalf("two ranges watched as %T, want *Merged", s)
	}
	for {
		if err := m.Progress(ctx); err != nil {
			t.Fatal(err)
		}
		if m.Last() >= head+1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Last = %d, want the ranges' progress %d", m.Last(), head+1)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
