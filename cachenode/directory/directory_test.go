package directory

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/storage/storagetest"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// source is a node's changeable range status.
type source struct {
	mu sync.Mutex // guards rs
	rs []RangeStatus
}

func (s *source) set(rs ...RangeStatus) {
	s.mu.Lock()
	s.rs = rs
	s.mu.Unlock()
}

func (s *source) get() []RangeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rs)
}

type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// stop cancels Run and waits for it; only the first call does anything.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return")
		}
	})
}

func run(t *testing.T, f func(context.Context) error) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f(ctx) }()
	return r
}

type env struct {
	t   *testing.T
	url string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts NATS: skipped under -short")
	}
	before := runtime.NumGoroutine()
	srv, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		storagetest.Eventually(t, 5*time.Second, "goroutines end", func() error {
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<20)
				return fmt.Errorf("%d goroutines left, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
			return nil
		})
	})
	return &env{t: t, url: srv.ClientURL()}
}

func (e *env) conn() *nats.Conn {
	e.t.Helper()
	nc, err := nats.Connect(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// publisher starts a publisher of node on its own connection.
func (e *env) publisher(node string, interval time.Duration, src *source) (*running, *nats.Conn) {
	e.t.Helper()
	nc := e.conn()
	p, err := NewPublisher(PublisherConfig{NATS: nc, Node: node, ReadAddr: node + ":8443", Interval: interval, Source: src.get})
	if err != nil {
		e.t.Fatal(err)
	}
	r := run(e.t, p.Run)
	e.t.Cleanup(func() { r.stop(e.t) })
	return r, nc
}

func (e *env) directory(expire time.Duration, reg prometheus.Registerer) *Directory {
	e.t.Helper()
	d, err := New(Config{NATS: e.conn(), Expire: expire, Metrics: reg})
	if err != nil {
		e.t.Fatal(err)
	}
	r := run(e.t, d.Run)
	e.t.Cleanup(func() { r.stop(e.t) })
	return d
}

func nodesAre(d *Directory, want ...string) func() error {
	return func() error {
		var got []string
		for _, n := range d.Nodes() {
			got = append(got, n.Node)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("nodes %v, want %v", got, want)
		}
		return nil
	}
}

func readyNodes(d *Directory, rangeID string) []string {
	var out []string
	for _, r := range d.Ready(rangeID) {
		out = append(out, r.Node)
	}
	return out
}

func TestTwoPublishers(t *testing.T) {
	e := newEnv(t)
	const interval = 100 * time.Millisecond
	reg := prometheus.NewRegistry()
	d := e.directory(time.Second, reg)

	var a, b source
	a.set(RangeStatus{ID: "pods-0", Ready: true, Seen: 100, Primary: true},
		RangeStatus{ID: "pods-1", Ready: true, Seen: 90})
	b.set(RangeStatus{ID: "pods-0", Ready: true, Seen: 105},
		RangeStatus{ID: "pods-1", Ready: true, Seen: 95},
		RangeStatus{ID: "pods-2", Seen: 50}) // still listing
	pa, nca := e.publisher("a", interval, &a)
	pb, _ := e.publisher("b", interval, &b)

	storagetest.Eventually(t, 3*time.Second, "the directory's nodes", nodesAre(d, "a", "b"))
	nodes := d.Nodes()
	if n := nodes[0]; n.ReadAddr != "a:8443" || n.Epoch == 0 || len(n.Ranges) != 2 || n.Heard.IsZero() {
		t.Errorf("node a = %+v", n)
	}
	// The primary first even when behind, then least lag.
	if got := d.Ready("pods-0"); !slices.Equal(got, []Replica{
		{Node: "a", ReadAddr: "a:8443", Seen: 100, Primary: true},
		{Node: "b", ReadAddr: "b:8443", Seen: 105},
	}) {
		t.Errorf("Ready(pods-0) = %+v", got)
	}
	if got := readyNodes(d, "pods-1"); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("Ready(pods-1) = %v, want the least lagging first", got)
	}
	if got := d.Ready("pods-2"); len(got) != 0 {
		t.Errorf("Ready(pods-2) = %v: not ready anywhere", got)
	}
	if got := gauge(t, reg, "kgate_directory_range_replicas", "pods-0"); got != 2 {
		t.Errorf("replicas{pods-0} = %v", got)
	}
	if got := gauge(t, reg, "kgate_directory_nodes", ""); got != 2 {
		t.Errorf("nodes = %v", got)
	}

	// A range becoming ready is announced before the next interval and
	// notified.
	for len(d.Changes()) > 0 {
		<-d.Changes()
	}
	b.set(RangeStatus{ID: "pods-0", Ready: true, Seen: 105},
		RangeStatus{ID: "pods-1", Ready: true, Seen: 95},
		RangeStatus{ID: "pods-2", Ready: true, Seen: 110, Primary: true})
	select {
	case <-d.Changes():
	case <-time.After(2 * time.Second):
		t.Fatal("no change notified")
	}
	storagetest.Eventually(t, time.Second, "b is pods-2's only ready node", func() error {
		if got := readyNodes(d, "pods-2"); !slices.Equal(got, []string{"b"}) {
			return fmt.Errorf("Ready(pods-2) = %v", got)
		}
		return nil
	})

	// b stops gracefully: forgotten at once, long before expiry.
	begin := time.Now()
	pb.stop(t)
	storagetest.Eventually(t, 500*time.Millisecond, "the directory's nodes", nodesAre(d, "a"))
	t.Logf("b, stopped, forgotten after %v", time.Since(begin))
	if got := readyNodes(d, "pods-0"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Ready(pods-0) = %v", got)
	}
	if got := gauge(t, reg, "kgate_directory_range_replicas", "pods-2"); got != 0 {
		t.Errorf("replicas{pods-2} = %v after b went", got)
	}

	// a's connection dies (no goodbye gets out): expired after ~1s.
	nca.Close()
	begin = time.Now()
	pa.stop(t)
	took := storagetest.Eventually(t, 3*time.Second, "the directory's nodes", nodesAre(d))
	t.Logf("a, silent, expired after %v", time.Since(begin))
	if took < 500*time.Millisecond {
		t.Errorf("a expired after %v, before Expire", took)
	}
	if got := d.Ready("pods-0"); len(got) != 0 {
		t.Errorf("Ready(pods-0) = %v after every node went", got)
	}
}

// TestDeafDirectoryKeepsNodes: when the directory's own NATS link is
// down, the silence is its own: the nodes it last heard stay until the
// link is back and they have had Expire to be heard again; then a node
// that stays silent is dropped as usual.
func TestDeafDirectoryKeepsNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS: skipped under -short")
	}
	srv, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	first := srv
	t.Cleanup(func() { first.Close() })
	e := &env{t: t, url: srv.ClientURL()}
	var a source
	a.set(RangeStatus{ID: "leases", Ready: true, Seen: 7})
	pa, nca := e.publisher("a", 50*time.Millisecond, &a)
	reg := prometheus.NewRegistry()
	d := e.directory(300*time.Millisecond, reg)
	storagetest.Eventually(t, 2*time.Second, "the directory's nodes", nodesAre(d, "a"))

	srv.Close() // every link is down: the directory hears no one
	storagetest.Eventually(t, 10*time.Second, "sweeps that found the link silent", func() error {
		if n := plainCounter(t, reg, "kgate_directory_deaf_sweeps_total"); n < 3 {
			return fmt.Errorf("%v deaf sweeps", n)
		}
		return nil
	})
	if err := nodesAre(d, "a")(); err != nil {
		t.Fatalf("while the directory's link was down: %v", err)
	}

	if srv, err = natsembed.Start(natsembed.Config{Port: port}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	a.set(RangeStatus{ID: "leases", Ready: true, Seen: 8})
	storagetest.Eventually(t, 10*time.Second, "a heard again", func() error {
		if n := d.Nodes(); len(n) != 1 || n[0].Ranges[0].Seen != 8 {
			return fmt.Errorf("nodes %+v", n)
		}
		return nil
	})

	nca.Close() // a dies; the directory's link is fine: a is dropped
	pa.stop(t)
	storagetest.Eventually(t, 3*time.Second, "the directory's nodes", nodesAre(d))
}

func TestProbeOnStart(t *testing.T) {
	e := newEnv(t)
	var a source
	a.set(RangeStatus{ID: "leases", Ready: true, Seen: 7})
	// The directory starts after a's one announcement (a subscribes to
	// probes before it announces, on the same connection).
	watcher := e.conn()
	announced, err := watcher.SubscribeSync(Subject("a"))
	if err == nil {
		err = watcher.Flush() // the server has the subscription
	}
	if err != nil {
		t.Fatal(err)
	}
	e.publisher("a", time.Hour, &a) // announces once, then only when asked
	if _, err := announced.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("a did not announce: %v", err)
	}
	d := e.directory(2*time.Hour, nil)
	took := storagetest.Eventually(t, 2*time.Second, "the directory's nodes", nodesAre(d, "a"))
	t.Logf("a directory started late heard a after %v", took)
}

// TestMalformedIgnored: malformed messages and a status sent on another
// node's subject (a forgery: permissions keep a node to the subjects of
// cache nodes, and the subject names the node) are ignored and counted.
func TestMalformedIgnored(t *testing.T) {
	e := newEnv(t)
	nc := e.conn()
	// The directory probes once it is subscribed: publish after that.
	probed, err := nc.SubscribeSync(ProbeSubject)
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d := e.directory(time.Minute, reg)
	if _, err := probed.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the directory did not probe: %v", err)
	}
	malformed := []string{`garbage`, `{}`, `{"v":1,"a":"x:1","e":1}`, `{"v":1,"n":"x","e":1}`, `{"v":1,"n":"x","a":"x:1","e":1,"r":"no"}`, `[1,2]`}
	for _, m := range malformed {
		if err := nc.Publish(Subject("x"), []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	forged, _ := encodeStatus("evil", "evil:1", 1, false, []RangeStatus{{ID: "pods", Ready: true}})
	if err := nc.Publish(Subject("good"), forged); err != nil {
		t.Fatal(err)
	}
	b, _ := encodeStatus("good", "good:1", 1, false, []RangeStatus{{ID: "pods", Ready: true}})
	if err := nc.Publish(Subject("good"), b); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 2*time.Second, "the directory's nodes", nodesAre(d, "good"))
	if got := counter(t, reg, "kgate_directory_ignored_messages_total", "malformed"); got != float64(len(malformed)) {
		t.Errorf("ignored malformed = %v, want %d", got, len(malformed))
	}
	if got := counter(t, reg, "kgate_directory_ignored_messages_total", "subject"); got != 1 {
		t.Errorf("ignored forged = %v, want 1", got)
	}
}

// plainCounter reads a counter without labels from reg.
func plainCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, _ := storagetest.Metric(t, reg, name)
	return v
}

// counter reads a counter with label reason from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	v, _ := storagetest.Metric(t, reg, name, "reason", reason)
	return v
}

// gauge reads a gauge (with label range, when not "") from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, rangeID string) float64 {
	t.Helper()
	var labels []string
	if rangeID != "" {
		labels = []string{"range", rangeID}
	}
	v, ok := storagetest.Metric(t, reg, name, labels...)
	if !ok {
		t.Fatalf("no %s{range=%q}", name, rangeID)
	}
	return v
}
