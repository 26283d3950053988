package watchhub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/natsembed"
)

// BenchmarkMergedWatch measures one event of a busy range delivered to
// every merged watch over it and three quiet ranges: the event's trip
// through NATS and the feed, the merge holding it, the progress requests
// to the quiet ranges' primary (a NATS responder here) and their answers.
// One op is one event delivered to all watchers; requests/op counts the
// progress requests the feeds sent for it.
func BenchmarkMergedWatch(b *testing.B) {
	for _, watchers := range []int{1, 100} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			benchMerged(b, watchers)
		})
	}
}

func benchMerged(b *testing.B, watchers int) {
	if testing.Short() {
		b.Skip("starts NATS")
	}
	const start = 100
	ids := []string{"busy", "q1", "q2", "q3"}
	win := multiWindow{}
	for _, id := range ids {
		win[id] = &window{head: start, oldest: start}
	}
	srv := startNATSb(b)
	nc := connectb(b, srv)
	hub, err := New(Config{NATS: nc, Source: win, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer hub.Close()

	// The quiet ranges' primary, on its own connection: answers each
	// request with the range's progress through the revision asked.
	pc := connectb(b, srv)
	var (
		mu       sync.Mutex
		requests int
		buf      []byte
	)
	sub, err := pc.Subscribe(event.ProgressRequestSubjects, func(m *nats.Msg) {
		id := event.RangeOfProgressRequest(m.Subject)
		rev, err := event.ParseProgressRequest(m.Data)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		requests++
		pr := event.Event{Type: event.Progress, Range: id, Revision: rev, PrevRangeRevision: start}
		buf = pr.AppendMarshal(buf[:0])
		_ = pc.Publish(event.ProgressSubject(id), buf)
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := pc.Flush(); err != nil {
		b.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan int64, watchers)
	var wg sync.WaitGroup
	for range watchers {
		s, err := hub.WatchRanges(ids, start, Filter{})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer s.Close()
			for {
				d, err := s.Next(ctx)
				if err != nil {
					return
				}
				got <- d.Rev
			}
		})
	}
	defer wg.Wait()
	defer cancel()

	ev := event.Event{Type: event.Modified, Range: "busy", Key: "a/o", Namespace: "a", Name: "o",
		Object: make([]byte, 4096), PrevObject: []byte(`{}`)}
	var data []byte
	prev := int64(start)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		rev := int64(start + 2*(i+1))
		ev.Revision, ev.PrevRangeRevision, ev.PrevSubjectRevision = rev, prev, prev
		prev = rev
		data = ev.AppendMarshal(data[:0])
		if err := nc.Publish(event.Subject("busy", "a"), data); err != nil {
			b.Fatal(err)
		}
		for range watchers {
			if r := <-got; r != rev {
				b.Fatalf("delivered revision %d, want %d", r, rev)
			}
		}
	}
	b.StopTimer()
	mu.Lock()
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	mu.Unlock()
}

func startNATSb(b *testing.B) *natsembed.Server {
	b.Helper()
	srv, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return srv
}

func connectb(b *testing.B, srv *natsembed.Server) *nats.Conn {
	b.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}
