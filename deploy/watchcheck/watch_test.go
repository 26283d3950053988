package watchcheck

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/cachenode/event"
)

// Soak knobs: each flag defaults to its environment variable, then to a
// size that keeps the package's tests well under a minute.
var (
	flagDuration = flag.Duration("watchcheck.duration", envDuration("WATCHCHECK_DURATION", 3*time.Second), "how long the writer writes in each run")
	flagWatchers = flag.Int("watchcheck.watchers", envInt("WATCHCHECK_WATCHERS", 50), "watchers per run")
	flagRate     = flag.Int("watchcheck.rate", envInt("WATCHCHECK_RATE", 150), "most writes a second")
	flagKeys     = flag.Int("watchcheck.keys", envInt("WATCHCHECK_KEYS", 12), "ConfigMap names per namespace (4 namespaces)")
	flagSeed     = flag.Uint64("watchcheck.seed", uint64(envInt("WATCHCHECK_SEED", 0)), "random seed; 0 picks one (logged)")
	flagDrop     = flag.Float64("watchcheck.drop", envFloat("WATCHCHECK_DROP", 0.1), "share of NATS event messages dropped in the drop run")
	flagObjects  = flag.Int("watchcheck.objects", envInt("WATCHCHECK_OBJECTS", 5000), "ConfigMaps in the paginated list test")
	// See TestRequestAfterWatchEnds: a connection that carried a watch
	// hangs the next request on it, so by default clients do not reuse
	// them; -watchcheck.reuse=true shows the hang in the contract runs.
	flagReuse = flag.Bool("watchcheck.reuse", os.Getenv("WATCHCHECK_REUSE") == "1", "let clients reuse connections that carried a watch")
)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return v
	}
	return def
}

// testLogger logs the cluster's warnings and errors (KGATE_TEST_LOG=debug
// for everything) to stderr.
func testLogger() *slog.Logger {
	level := slog.LevelError
	switch os.Getenv("KGATE_TEST_LOG") {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func seed(t *testing.T) uint64 {
	s := *flagSeed
	if s == 0 {
		s = rand.Uint64() % 1_000_000
	}
	t.Logf("seed %d (-watchcheck.seed=%d repeats the run)", s, s)
	return s
}

// startCluster starts a cluster for t, closed at its end.
func startCluster(t *testing.T) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Dir: t.TempDir(), Logger: testLogger()})
	if err != nil {
		t.Fatalf("cannot start cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cannot close cluster: %v", err)
		}
	})
	return c
}

func clientset(t *testing.T, c *Cluster, agent string, protobuf bool) kubernetes.Interface {
	t.Helper()
	cfg, err := c.RESTConfig(agent, protobuf)
	if err != nil {
		t.Fatal(err)
	}
	if !*flagReuse {
		cfg.WrapTransport = closeAfterWatch
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// closeAfterWatch makes watch requests ask for "Connection: close", so
// that the connection is not reused after the watch ends.
func closeAfterWatch(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") == "true" {
			req = req.Clone(req.Context())
			req.Close = true
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func createNamespaces(ctx context.Context, t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	for _, ns := range names {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cannot create namespace %s: %v", ns, err)
		}
	}
}

// fault is what a run does to the cluster.
type fault string

const (
	faultNone = fault("clean")
	faultDrop = fault("drop")      // drop a share of the node's NATS event messages
	faultNATS = fault("nats")      // restart the NATS server mid-run
	faultNode = fault("cachenode") // restart the cache node mid-run
	// restart the cache node mid-run with the writer paused: no watcher
	// falls behind the new window, so none may get 410
	faultQuietNode = fault("cachenode-quiet")
)

// TestWatchContract runs the randomized watch checker: one writer, random
// watchers and two informers, in a clean run and under four faults. Each
// watch stream must be exactly what the writes imply; 410s are allowed only
// after a cache node restart and only for watchers behind its new window;
// an informer may relist only after such a 410.
//
//	go test ./deploy/watchcheck -run TestWatchContract -v
//	go test ./deploy/watchcheck -run TestWatchContract -v -timeout 1h \
//	    -watchcheck.duration=5m -watchcheck.rate=500 -watchcheck.watchers=200
//
// (or WATCHCHECK_DURATION, _RATE, _WATCHERS, _KEYS, _SEED, _DROP).
func TestWatchContract(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	s := seed(t)
	for i, f := range []fault{faultNone, faultDrop, faultNATS, faultNode, faultQuietNode} {
		t.Run(string(f), func(t *testing.T) { runContract(t, f, s+uint64(i)) })
	}
}

// runStats are the counts of one run.
type runStats struct {
	writes, failedWrites                 int
	initial, delivered, bookmarks        int
	resumes, startErrs, streamErrs       int
	expired, justified                   int
	dropped                              int64
	repairs, catchups, overflows, feedEv float64
	relists                              []string
	errSamples                           map[string]int
}

func runContract(t *testing.T, f fault, seed uint64) {
	c := startCluster(t)
	d := *flagDuration
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+4*d)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 2))
	namespaces := []string{"ns-0", "ns-1", "ns-2", "ns-3"}
	admin := clientset(t, c, "watchcheck/writer", false)
	createNamespaces(ctx, t, admin, namespaces...)
	hist := &History{}
	wr := newWriter(c, admin, hist, seed, namespaces, *flagKeys)

	var dropped atomic.Int64
	if f == faultDrop {
		share := *flagDrop
		c.SetDrop(func(ev *event.Event) bool {
			if ev.Type == event.Progress || ev.Range != c.RangeID || rand.Float64() >= share {
				return false
			}
			dropped.Add(1)
			return true
		})
	}
	infs := startInformers(ctx, t, c)

	start := time.Now()
	writeCtx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	writerDone := make(chan error, 1)
	go func() { writerDone <- wr.run(writeCtx, *flagRate) }()

	csJSON := clientset(t, c, "watchcheck/watcher", false)
	csProto := clientset(t, c, "watchcheck/watcher-protobuf", true)
	watchCtx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	var wg sync.WaitGroup
	watchers := make([]*watcher, *flagWatchers)
	for i := range watchers {
		spec := randomSpec(rng, i, namespaces)
		filter, err := ParseFilter(spec.Namespace, spec.Label, spec.Field)
		if err != nil {
			t.Fatal(err)
		}
		cs := csJSON
		if spec.Protobuf {
			cs = csProto
		}
		w := &watcher{spec: spec, filter: filter, cs: cs, hist: hist}
		watchers[i] = w
		at := d / 5
		if i >= len(watchers)/2 {
			at += time.Duration(rng.Float64() * float64(d) * 0.7)
		}
		pick := rng.Float64()
		wg.Go(func() {
			select {
			case <-time.After(time.Until(start.Add(at))):
			case <-watchCtx.Done():
				return
			}
			var from int64
			switch spec.Start {
			case startNow:
				from = hist.LastRev()
			case startBack:
				if ws := hist.Writes(); len(ws) > 0 {
					lo := ws[0].Rev - 1
					from = lo + int64(pick*float64(ws[len(ws)-1].Rev-lo))
				}
			}
			w.run(watchCtx, from)
		})
	}

	// The fault, half way.
	time.Sleep(time.Until(start.Add(d / 2)))
	switch f {
	case faultNATS:
		if err := c.StopNATS(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := c.StartNATS(); err != nil {
			t.Fatal(err)
		}
	case faultNode, faultQuietNode:
		if f == faultQuietNode {
			wr.pause.Lock()
			time.Sleep(time.Second) // every watch and informer has the last write
		}
		if err := c.StopNode(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if err := c.StartNode(ctx); err != nil {
			t.Fatal(err)
		}
		if f == faultQuietNode {
			time.Sleep(500 * time.Millisecond)
			wr.pause.Unlock()
		}
	}
	time.Sleep(time.Until(start.Add(d)))
	stopWriter()
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	final := hist.LastRev()
	if wr.failed > 0 {
		t.Logf("%d writes failed, first: %q", wr.failed, wr.errs)
	}
	if why, w := settle(watchers, infs, final); why != "" {
		t.Logf("not settled after 20s: %s", why)
		if w != nil {
			segs, ends := w.segments()
			for i, seg := range segs[max(0, len(segs)-4):] {
				t.Logf("  segment %d start=%q ended=%q events=%d tail=%s", i, seg.Start, ends[i], len(seg.Events), around(seg.Events, len(seg.Events)-1, 4))
			}
		}
	}
	stopWatchers()
	wg.Wait()

	if err := wr.verify(ctx); err != nil {
		t.Fatalf("the recorded writes disagree with etcd: %v", err)
	}
	writes := hist.Writes()
	truth, etcdRev, err := c.ConfigMaps(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	starts := c.NodeStarts()
	windowAt := func(at time.Time) int64 {
		from := starts[0].WindowFrom
		for _, s := range starts[1:] {
			if !s.Began.After(at) && s.WindowFrom != 0 {
				from = s.WindowFrom
			}
		}
		return from
	}
	st := runStats{writes: len(writes), failedWrites: wr.failed, dropped: dropped.Load()}
	failures := 0
	fail := func(format string, args ...any) {
		failures++
		if failures <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, w := range watchers {
		segs, ends := w.segments()
		w.mu.Lock()
		expired := append([]expiry(nil), w.expired...)
		st.resumes += w.resumes
		st.startErrs += w.startErrs
		w.mu.Unlock()
		verdicts := make([]Verdict, len(segs))
		for i, seg := range segs {
			v, err := w.filter.Check(writes, seg)
			verdicts[i] = v
			if err != nil {
				fail("%s, segment %d of %d (start %q, ended %s, %d events): %v", w.spec, i, len(segs), seg.Start, ends[i], len(seg.Events), err)
				break
			}
			st.initial += v.Initial
			st.delivered += v.Delivered
			st.bookmarks += v.Bookmarks
			for _, e := range seg.Events {
				if e.Type == "BOOKMARK" && e.RV > etcdRev {
					fail("%s, segment %d: bookmark at %d ahead of etcd's revision %d", w.spec, i, e.RV, etcdRev)
				}
				if e.Type == "ERROR" && e.Code != 410 {
					st.streamErrs++
					if st.errSamples == nil {
						st.errSamples = map[string]int{}
					}
					msg := e.Message
					if i := strings.Index(msg, "cannot read events of"); i >= 0 {
						msg = msg[i:]
					}
					st.errSamples[fmt.Sprintf("%d %.160s", e.Code, msg)]++
					if f != faultNode && f != faultQuietNode {
						fail("%s, segment %d: %s", w.spec, i, &e)
					}
				}
			}
		}
		for _, x := range expired {
			st.expired++
			from, detail := x.From, fmt.Sprintf("the watch request from %d", x.From)
			if x.Segment >= 0 {
				seg := segs[x.Segment]
				from = verdicts[x.Segment].Through
				detail = fmt.Sprintf("segment %d (start %q, snapshot %d, %d events, began %s): %s", x.Segment, seg.Start,
					verdicts[x.Segment].Snapshot, len(seg.Events), seg.Began.Sub(start).Round(time.Millisecond), around(seg.Events, len(seg.Events)-1, 2))
			}
			if window := windowAt(x.At); from < window {
				st.justified++
			} else {
				fail("%s: unjustified 410 Expired at %s: the watch was complete through %d, the window holds every event after %d; %s",
					w.spec, x.At.Sub(start).Round(time.Millisecond), from, window, detail)
			}
		}
	}

	for _, in := range infs {
		state, err := in.storeState()
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffStates(truth, state); diff != "" {
			fail("%s: store differs from etcd at %d: %s", in.name, etcdRev, diff)
		}
		in.lw.mu.Lock()
		relists := in.lw.listsOK + in.lw.watchListOK - 1
		expired := append([]informerExpiry(nil), in.lw.expired...)
		attempts := in.lw.lists + in.lw.watchLists - 1
		in.lw.mu.Unlock()
		justified := 0
		for _, x := range expired {
			if window := windowAt(x.At); x.Seen < window {
				justified++
			} else {
				fail("%s: unjustified 410 Expired at %s: it had seen %d, the window holds every event after %d", in.name, x.At.Sub(start).Round(time.Millisecond), x.Seen, window)
			}
		}
		if relists > justified {
			fail("%s: %d relists (%d attempts) after %d justified 410s", in.name, relists, attempts, justified)
		}
		st.relists = append(st.relists, fmt.Sprintf("%s relists=%d (attempts %d, 410s %d)", in.name, relists, attempts, len(expired)))
	}
	st.repairs = c.Counter("kgate_gateway_watch_feed_repairs_total")
	st.catchups = c.Counter("kgate_gateway_watcher_catchups_total")
	st.overflows = c.Counter("kgate_gateway_watcher_overflows_total")
	st.feedEv = c.Counter("kgate_gateway_watch_feed_events_total")
	var windows []string
	for _, s := range starts {
		if s.WindowFrom != 0 {
			windows = append(windows, strconv.FormatInt(s.WindowFrom, 10))
		}
	}
	for i, s := range starts[1:] {
		if s.WindowFrom != 0 {
			t.Logf("cache node restart %d: stopped at %s, new window from %d", i+1, s.Began.Sub(start).Round(time.Millisecond), s.WindowFrom)
		}
	}
	t.Logf("run %s: writes=%d (failed %d, last rev %d) | watchers=%d events=%d initial=%d bookmarks=%d resumes=%d start-errors=%d stream-errors=%d | 410s=%d justified=%d | feed events=%.0f repairs=%.0f catchups=%.0f overflows=%.0f | NATS dropped=%d | windows from %s | %s",
		f, st.writes, st.failedWrites, final, len(watchers), st.delivered, st.initial, st.bookmarks, st.resumes, st.startErrs, st.streamErrs,
		st.expired, st.justified, st.feedEv, st.repairs, st.catchups, st.overflows, st.dropped, strings.Join(windows, ","), strings.Join(st.relists, "; "))
	for msg, n := range st.errSamples {
		t.Logf("stream error x%d: %s", n, msg)
	}
	if failures > 10 {
		t.Errorf("... %d failures in all", failures)
	}
}

// settle waits until every watcher has gone quiet, those with bookmarks
// have one at the last write, and the informers hold the last write —
// at most 20s: whatever is missing then is reported as lost.
func settle(watchers []*watcher, infs []*informer, final int64) (string, *watcher) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		why := ""
		var who *watcher
		for _, w := range watchers {
			who = w
			quiet, mark := w.quiet(1500 * time.Millisecond)
			if !quiet {
				why = fmt.Sprintf("%s not quiet", w.spec)
				break
			}
			if (w.spec.Bookmarks || w.spec.Start == startList) && mark < final && hasSegments(w) {
				why = fmt.Sprintf("%s: last bookmark %d, last write %d", w.spec, mark, final)
				break
			}
		}
		if why == "" {
			who = nil
		}
		for _, in := range infs {
			if rv, _ := strconv.ParseInt(in.inf.LastSyncResourceVersion(), 10, 64); rv < final {
				why = fmt.Sprintf("%s synced to %d, last write %d", in.name, rv, final)
			}
		}
		if why == "" || time.Now().After(deadline) {
			return why, who
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hasSegments(w *watcher) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.segs) > 0
}
