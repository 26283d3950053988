package watchhub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/storage"
)

// window is an in-memory stand-in for a cache node's window: the
// authoritative history of one range.
type window struct {
	mu      sync.Mutex
	events  []event.Event
	head    int64 // the range has seen everything up to head
	oldest  int64 // Events(since) with since < oldest is compacted
	maxResp int   // answers hold at most this many events (0: all)
}

func (w *window) Events(_ context.Context, _ string, since int64) ([]event.Event, int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if since < w.oldest {
		return nil, 0, fmt.Errorf("since %d: %w", since, storage.ErrCompacted)
	}
	var out []event.Event
	for i, ev := range w.events {
		if ev.Revision <= since {
			continue
		}
		if w.maxResp > 0 && len(out) >= w.maxResp {
			// Never split a revision: answer up to the one before.
			last := out[len(out)-1].Revision
			if w.events[i].Revision == last {
				for len(out) > 0 && out[len(out)-1].Revision == last {
					out = out[:len(out)-1]
				}
				return out, last - 1, nil
			}
			return out, last, nil
		}
		out = append(out, ev)
	}
	return out, w.head, nil
}

func (w *window) add(ev event.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, ev)
	if ev.Last() {
		w.head = ev.Revision // complete only with its last event, as a cache node's window
	}
}

// history makes n revisions on range r over namespaces a, b, c, some with
// several events, with chains as a reflector builds them.
func history(rnd *rand.Rand, start int64, n int) []event.Event {
	var out []event.Event
	live := map[string]map[string]string{} // key -> labels
	last := start
	subj := map[string]int64{}
	rev := start
	for range n {
		rev += 1 + int64(rnd.IntN(2)) // revisions of other ranges in between
		count := 1
		if rnd.IntN(6) == 0 {
			count = 2 + rnd.IntN(2)
		}
		used := map[string]bool{}
		var group []event.Event
		for len(group) < count {
			ns := string(rune('a' + rnd.IntN(3)))
			name := fmt.Sprintf("o%d", rnd.IntN(6))
			key := ns + "/" + name
			if used[key] {
				continue
			}
			used[key] = true
			lbl := map[string]string{"color": []string{"red", "blue"}[rnd.IntN(2)]}
			ev := event.Event{Range: "r", Revision: rev, Key: key, Namespace: ns, Name: name,
				Object: []byte(fmt.Sprintf(`{"rev":%d,"key":%q}`, rev, key)), Labels: lbl}
			prev, exists := live[key]
			switch {
			case !exists:
				ev.Type = event.Added
				live[key] = lbl
			case rnd.IntN(3) == 0:
				ev.Type = event.Deleted
				ev.Labels = prev
				ev.PrevObject, ev.PrevLabels = []byte(`{}`), prev
				delete(live, key)
			default:
				ev.Type = event.Modified
				ev.PrevObject, ev.PrevLabels = []byte(`{}`), prev
				live[key] = lbl
			}
			group = append(group, ev)
		}
		for i := range group {
			group[i].Index, group[i].Count = uint32(i), uint32(len(group))
			group[i].PrevRangeRevision = last
			if s, ok := subj[group[i].Namespace]; ok {
				group[i].PrevSubjectRevision = s
			} else {
				group[i].PrevSubjectRevision = start
			}
			subj[group[i].Namespace] = rev
		}
		last = rev
		out = append(out, group...)
	}
	return out
}

// expected is what a watcher from since with filter f must receive.
func expected(all []event.Event, since int64, f Filter) []string {
	var out []string
	for i := range all {
		ev := &all[i]
		if ev.Revision <= since {
			continue
		}
		if t, _, ok := f.classify(ev); ok {
			out = append(out, fmt.Sprintf("%s %d.%d %s", t, ev.Revision, ev.Index, ev.Key))
		}
	}
	return out
}

func startNATS(t *testing.T) *nats.Conn {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestHubDeliversEveryEventOnceInOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS")
	}
	for _, tc := range []struct {
		name     string
		drop     float64 // share of messages lost
		dup      float64 // share duplicated
		queueLen int
		maxResp  int
	}{
		{name: "clean", queueLen: 1024},
		{name: "lossy", drop: 0.2, dup: 0.1, queueLen: 1024, maxResp: 7},
		{name: "slow watchers overflow", drop: 0.05, queueLen: 3, maxResp: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			const start = 100
			all := history(rnd, start, 300)
			win := &window{head: start, oldest: start, maxResp: tc.maxResp}
			nc := startNATS(t)
			hub, err := New(Config{NATS: nc, Source: win, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				QueueLen: tc.queueLen, RepairTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer hub.Close()

			red, _ := labels.Parse("color=red")
			type spec struct {
				since  int64
				filter Filter
				slow   bool
				batch  bool // take what is Ready after each Next, as a stream writer does
			}
			specs := []spec{
				{since: start},
				{since: start, filter: Filter{Namespace: "a"}, batch: true},
				{since: start, filter: Filter{Labels: red}, slow: true, batch: true},
				{since: all[len(all)/3].Revision, filter: Filter{Namespace: "b", Labels: red}},
				{since: all[len(all)/2].Revision - 1, slow: true},
				{since: all[len(all)/2].Revision - 1, slow: true, batch: true},
			}
			// Publish half the history before the late watchers start, so
			// they join behind the feed and catch up from the window.
			publish := func(evs []event.Event) {
				for _, ev := range evs {
					win.add(ev)
					if rnd.Float64() < tc.drop {
						continue
					}
					n := 1
					if rnd.Float64() < tc.dup {
						n = 2
					}
					for range n {
						if err := nc.Publish(event.Subject("r", ev.Namespace), ev.Marshal()); err != nil {
							t.Error(err)
						}
					}
				}
			}
			var wg sync.WaitGroup
			results := make([][]string, len(specs))
			startWatcher := func(i int) {
				w, err := hub.Watch("r", specs[i].since, specs[i].filter)
				if err != nil {
					t.Error(err)
					return
				}
				want := len(expected(all, specs[i].since, specs[i].filter))
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer w.Close()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					for len(results[i]) < want {
						d, err := w.Next(ctx)
						if err != nil {
							t.Errorf("watcher %d after %d events: %v", i, len(results[i]), err)
							return
						}
						results[i] = append(results[i], fmt.Sprintf("%s %d.%d %s", d.Type, d.Event.Revision, d.Event.Index, d.Event.Key))
						for specs[i].batch {
							d, ok := w.Ready()
							if !ok {
								break
							}
							results[i] = append(results[i], fmt.Sprintf("%s %d.%d %s", d.Type, d.Event.Revision, d.Event.Index, d.Event.Key))
						}
						if specs[i].slow && len(results[i])%10 == 0 {
							// A slow consumer, slow in real time: the feed
							// publishes meanwhile, overflowing its queue.
							time.Sleep(20 * time.Millisecond)
						}
					}
				}()
			}
			for i := range specs[:3] {
				startWatcher(i)
			}
			half := len(all) / 2
			for half < len(all) && all[half].Index != 0 {
				half++
			}
			publish(all[:half])
			for i := 3; i < len(specs); i++ {
				startWatcher(i)
			}
			publish(all[half:])
			// A progress message after the last event lets feeds notice a
			// lost tail, as cache nodes do when a range goes quiet.
			last := all[len(all)-1].Revision
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
						pr := event.Event{Type: event.Progress, Range: "r", Revision: last + 5, PrevRangeRevision: last}
						_ = nc.Publish(event.ProgressSubject("r"), pr.Marshal())
					}
				}
			}()
			wg.Wait()
			close(stop)
			for i, s := range specs {
				want := expected(all, s.since, s.filter)
				got := results[i]
				if len(got) != len(want) {
					t.Fatalf("watcher %d: %d events, want %d", i, len(got), len(want))
				}
				for j := range want {
					if got[j] != want[j] {
						t.Fatalf("watcher %d event %d: got %q, want %q", i, j, got[j], want[j])
					}
				}
			}
		})
	}
}

func TestHubExpiresWatchersBehindTheWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS")
	}
	nc := startNATS(t)
	win := &window{head: 500, oldest: 400}
	hub, err := New(Config{NATS: nc, Source: win, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	w, err := hub.Watch("r", 300, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.Next(ctx); !isCompacted(err) {
		t.Fatalf("Next = %v, want an error wrapping storage.ErrCompacted", err)
	}
}

func isCompacted(err error) bool {
	for e := err; e != nil; {
		if e == storage.ErrCompacted {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}
