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
	"k8s.io/client-go/rest"

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
	flagObjects  = flag.Int("watchcheck.objects", envInt("WATCHCHECK_OBJECTS", 2500), "ConfigMaps in the paginated list test")
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

// parallel marks t parallel, after the sequential tests, unless -short
// skips it anyway. Tests with informers (startInformers) set client-go's
// feature gates for the whole process and must stay sequential.
func parallel(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	t.Parallel()
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
	return newClientset(t, cfg)
}

// newClientset makes a clientset of cfg that (unless -watchcheck.reuse)
// does not reuse connections that carried a watch.
func newClientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
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

func runContract(t *testing.T, f fault, seed uint64) {
	c := startCluster(t)
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
	clients := map[string]kubernetes.Interface{}
	var clientsMu sync.Mutex
	run := &contract{
		name:  string(f),
		seed:  seed,
		truth: &c.Truth,
		client: func(t *testing.T, agent string, protobuf bool, _ int) kubernetes.Interface {
			clientsMu.Lock()
			defer clientsMu.Unlock()
			if cs, ok := clients[agent]; ok {
				return cs
			}
			cs := clientset(t, c, agent, protobuf)
			clients[agent] = cs
			return cs
		},
		streamErrorsOK: f == faultNode || f == faultQuietNode,
		counter:        c.Counter,
	}
	run.fault = func(ctx context.Context, t *testing.T, start time.Time, d time.Duration, wr *writer, caughtUp func(*testing.T)) {
		// The fault, half way through the run's real time; the outages
		// below last real time too (what the watches must survive).
		time.Sleep(time.Until(start.Add(d / 2))) // wall clock: the run's midpoint
		switch f {
		case faultNATS:
			if err := c.StopNATS(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // wall clock: a NATS outage of one second
			if err := c.StartNATS(); err != nil {
				t.Fatal(err)
			}
		case faultNode, faultQuietNode:
			if f == faultQuietNode {
				wr.pause.Lock()
				defer wr.pause.Unlock()
				caughtUp(t) // every watch and informer has the last write
			}
			if err := c.StopNode(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // wall clock: the node is down this long
			if err := c.StartNode(ctx); err != nil {
				t.Fatal(err)
			}
			if f == faultQuietNode {
				time.Sleep(500 * time.Millisecond) // wall clock: the range stays quiet after the restart: the fault
			}
		}
	}
	run.windowAt = func(at time.Time) int64 {
		starts := c.NodeStarts()
		from := starts[0].WindowFrom
		for _, s := range starts[1:] {
			if !s.Began.After(at) && s.WindowFrom != 0 {
				from = s.WindowFrom
			}
		}
		return from
	}
	run.summary = func(start time.Time) string {
		var windows []string
		for i, s := range c.NodeStarts() {
			if s.WindowFrom == 0 {
				continue
			}
			windows = append(windows, strconv.FormatInt(s.WindowFrom, 10))
			if i > 0 {
				t.Logf("cache node restart %d: stopped at %s, new window from %d", i, s.Began.Sub(start).Round(time.Millisecond), s.WindowFrom)
			}
		}
		return fmt.Sprintf("NATS dropped=%d | windows from %s", dropped.Load(), strings.Join(windows, ","))
	}
	run.exec(t)
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
		// A poll that reports what is still missing rather than failing
		// (storagetest.Eventually would fail); quiet is real time.
		time.Sleep(100 * time.Millisecond)
	}
}

func hasSegments(w *watcher) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.segs) > 0
}
