package rest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/gateway/internal/watchhub"
)

// warmWindow is a range's window holding one event after start: the
// feed and every watcher get it from there (by repair or catch-up), so
// once each watcher has it, all are attached and what follows comes
// over NATS.
type warmWindow struct{ first event.Event }

func (w warmWindow) Events(_ context.Context, _ string, since int64) ([]event.Event, int64, error) {
	if since >= w.first.Revision {
		return nil, w.first.Revision, nil
	}
	return []event.Event{w.first}, w.first.Revision, nil
}

// BenchmarkWatchFanOut measures one ConfigMap change delivered to every
// watch of its namespace, end to end on a gateway: the event published on
// NATS, the range's feed, each watch's goroutine framing it (once per
// format, shared) and writing it as a chunk to its TCP connection on
// loopback, and a client reading the chunked body. One op is one event
// seen by all watchers; ns/delivery is the cost per watcher, which the
// client's reads are part of.
func BenchmarkWatchFanOut(b *testing.B) {
	for _, watchers := range []int{1, 100, 1000} {
		for _, format := range []string{"json", "protobuf"} {
			b.Run(fmt.Sprintf("watchers=%d/%s", watchers, format), func(b *testing.B) {
				benchFanOut(b, watchers, format)
			})
		}
	}
}

func benchFanOut(b *testing.B, watchers int, format string) {
	if testing.Short() {
		b.Skip("starts NATS")
	}
	const start = 100
	srv, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	win := &warmWindow{}
	hub, err := watchhub.New(watchhub.Config{NATS: nc, Source: win, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hub.Close() })
	e := newEnv(b, func(c *Config) { c.Hub = hub })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	e.serve(ln)
	res := e.resource(configmapsGVR)
	rngs := e.h.cfg.Ranges.Current().Intersecting(res.ListPrefix("a"))
	if len(rngs) != 1 {
		b.Fatalf("configmaps of a span %d ranges", len(rngs))
	}
	rangeID := rngs[0].ID
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "a", UID: "u-1", Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"payload": strings.Repeat("x", 4000)},
	}
	ev := event.Event{Type: event.Modified, Range: rangeID, Key: res.ListPrefix("a") + "o", Namespace: "a", Name: "o"}
	change := func(rev, prev int64) {
		cm.ResourceVersion = fmt.Sprint(rev)
		obj := mustJSON(b, cm)
		ev.Object, ev.PrevObject = obj, obj
		ev.Revision, ev.PrevRangeRevision, ev.PrevSubjectRevision = rev, prev, prev
	}
	change(start+2, start)
	win.first = ev

	accept := "application/json"
	if format == "protobuf" {
		accept = "application/vnd.kubernetes.protobuf;stream=watch"
	}
	// Each client counts the frames it reads and reports each one.
	got := make(chan struct{}, watchers)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for range watchers {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		context.AfterFunc(ctx, func() { conn.Close() })
		fmt.Fprintf(conn, "GET /api/v1/namespaces/a/configmaps?watch=1&resourceVersion=%d HTTP/1.1\r\nHost: kgate\r\nAccept: %s\r\n\r\n", start, accept)
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 64<<10), nil)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("watch: %s", resp.Status)
		}
		wg.Go(func() { countFrames(ctx, resp, format, got) })
	}

	for range watchers {
		<-got // the first event, from the window: every watcher is attached
	}
	var data []byte
	prev := int64(start + 2)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		rev := int64(start + 2*(i+2))
		change(rev, prev)
		prev = rev
		data = ev.AppendMarshal(data[:0])
		if err := nc.Publish(event.Subject(rangeID, "a"), data); err != nil {
			b.Fatal(err)
		}
		for range watchers {
			<-got
		}
	}
	b.StopTimer()
	if extra := len(got); extra > 0 {
		b.Fatalf("%d frames more than events", extra)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*watchers), "ns/delivery")
}

// countFrames reads a watch's decoded body and reports every frame: a
// JSON frame ends with a newline, a protobuf frame is length-prefixed.
func countFrames(ctx context.Context, resp *http.Response, format string, got chan<- struct{}) {
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	if format == "json" {
		for {
			_, err := r.ReadSlice('\n') // no bookmarks were asked for
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				return
			}
			select {
			case got <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}
	var hdr [4]byte
	buf := make([]byte, 64<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
		if n > len(buf) {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return
		}
		select {
		case got <- struct{}{}:
		case <-ctx.Done():
			return
		}
	}
}
