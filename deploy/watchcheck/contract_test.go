package watchcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/storage/storagetest"
)

// contract is one run of the watch contract — a writer, random watchers
// and two informers, a fault — against some kgate: the single-node
// Cluster or the scaled-out Multi.
type contract struct {
	name  string
	seed  uint64
	truth *Truth
	// client returns the clientset of the client named agent; i numbers
	// the clients of one kind (the watcher's id), so that a target can
	// spread them over its gateways.
	client func(t *testing.T, agent string, protobuf bool, i int) kubernetes.Interface
	// fault runs in the test's goroutine as soon as the writer starts
	// (at start) and returns before the end of the writes (start+d).
	// caughtUp waits until the watches have every write made so far (see
	// contract.caughtUp).
	fault func(ctx context.Context, t *testing.T, start time.Time, d time.Duration, wr *writer, caughtUp func(*testing.T))
	// windowAt is the oldest revision the cache could serve events after
	// at time at: a 410 for a watch complete through from is justified
	// only when from < windowAt(at).
	windowAt func(at time.Time) int64
	// streamErrorsOK tolerates (and counts) ERROR events other than 410.
	streamErrorsOK bool
	// counter sums a counter of the gateways' metrics.
	counter func(name string) float64
	// summary adds to the run's log line; start is when writes began.
	summary func(start time.Time) string
}

// runStats are the counts of one run.
type runStats struct {
	writes, failedWrites                 int
	initial, delivered, bookmarks        int
	resumes, startErrs, streamErrs       int
	expired, justified                   int
	repairs, catchups, overflows, feedEv float64
	relists                              []string
	errSamples                           map[string]int
}

// caughtUp waits until the informers have reached final (their last
// synced revision), and so have the started watchers that follow
// bookmarks (their last bookmark or event): the gateway's feed has then
// dispatched every event through final. A watcher with bookmarks that has
// had none yet is not waited for: one whose stream began at final or
// later gets none until the range moves past where it began, which the
// paused writer does not do. (A watcher without bookmarks shows nothing
// when no event of final matches its filter; it is served by the same
// feed.)
func caughtUp(t *testing.T, watchers []*watcher, infs []*informer, final int64) {
	t.Helper()
	storagetest.Eventually(t, 30*time.Second, fmt.Sprintf("the watches at the last write %d", final), func() error {
		for _, in := range infs {
			if rv, _ := strconv.ParseInt(in.inf.LastSyncResourceVersion(), 10, 64); rv < final {
				return fmt.Errorf("%s synced to %d", in.name, rv)
			}
		}
		for _, w := range watchers {
			if !w.spec.Bookmarks && w.spec.Start != startList {
				continue
			}
			w.mu.Lock()
			mark, at := w.lastMark, max(w.lastMark, w.maxRV)
			w.mu.Unlock()
			if mark > 0 && at < final {
				return fmt.Errorf("%s: last bookmark %d, last event %d", w.spec, mark, at)
			}
		}
		return nil
	})
}

// exec runs the contract and checks every stream, informer and 410.
func (r *contract) exec(t *testing.T) {
	d := *flagDuration
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+4*d)
	defer cancel()
	rng := rand.New(rand.NewPCG(r.seed, 2))
	namespaces := []string{"ns-0", "ns-1", "ns-2", "ns-3"}
	admin := r.client(t, "watchcheck/writer", false, 0)
	createNamespaces(ctx, t, admin, namespaces...)
	hist := seededHistory(ctx, t, r.truth)
	wr := newWriter(r.truth, admin, hist, r.seed, namespaces, *flagKeys)

	infs := startInformers(ctx, t, func(agent string, protobuf bool, i int) kubernetes.Interface {
		return r.client(t, agent, protobuf, i)
	})

	start := time.Now()
	writeCtx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	writerDone := make(chan error, 1)
	go func() { writerDone <- wr.run(writeCtx, *flagRate) }()

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
		agent := "watchcheck/watcher"
		if spec.Protobuf {
			agent = "watchcheck/watcher-protobuf"
		}
		w := &watcher{spec: spec, filter: filter, cs: r.client(t, agent, spec.Protobuf, i), hist: hist}
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

	if r.fault != nil {
		r.fault(ctx, t, start, d, wr, func(t *testing.T) { caughtUp(t, watchers, infs, hist.LastRev()) })
	}
	time.Sleep(time.Until(start.Add(d))) // the run lasts d of real time (-watchcheck.duration)
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
	truth, etcdRev, err := r.truth.ConfigMaps(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	st := runStats{writes: len(writes), failedWrites: wr.failed}
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
					if !r.streamErrorsOK {
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
			if window := r.windowAt(x.At); from < window {
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
		if diff := DiffStates(truth, state); diff != "" {
			fail("%s: store differs from etcd at %d: %s", in.name, etcdRev, diff)
		}
		n := in.lw.Counts()
		relists := n.ListsOK + n.WatchListsOK - 1
		expired := in.lw.Expired()
		attempts := n.Lists + n.WatchLists - 1
		justified := 0
		for _, x := range expired {
			if window := r.windowAt(x.At); x.Seen < window {
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
	st.repairs = r.counter("kgate_gateway_watch_feed_repairs_total")
	st.catchups = r.counter("kgate_gateway_watcher_catchups_total")
	st.overflows = r.counter("kgate_gateway_watcher_overflows_total")
	st.feedEv = r.counter("kgate_gateway_watch_feed_events_total")
	extra := ""
	if r.summary != nil {
		extra = " | " + r.summary(start)
	}
	t.Logf("run %s: writes=%d (failed %d, last rev %d) | watchers=%d events=%d initial=%d bookmarks=%d resumes=%d start-errors=%d stream-errors=%d | 410s=%d justified=%d | feed events=%.0f repairs=%.0f catchups=%.0f overflows=%.0f%s | %s",
		r.name, st.writes, st.failedWrites, final, len(watchers), st.delivered, st.initial, st.bookmarks, st.resumes, st.startErrs, st.streamErrs,
		st.expired, st.justified, st.feedEv, st.repairs, st.catchups, st.overflows, extra, strings.Join(st.relists, "; "))
	for msg, n := range st.errSamples {
		t.Logf("stream error x%d: %s", n, msg)
	}
	if failures > 10 {
		t.Errorf("... %d failures in all", failures)
	}
}

// seededHistory is a history that starts with the ConfigMaps already
// stored, once the tier's own one is: the leader gateway writes
// kube-system/extension-apiserver-authentication (as kube-apiserver
// does), and watchers of every namespace see it as they see the
// writer's.
func seededHistory(ctx context.Context, t *testing.T, truth *Truth) *History {
	t.Helper()
	if err := truth.WaitFor(ctx, "kube-system", "extension-apiserver-authentication"); err != nil {
		t.Fatal(err)
	}
	objs, _, err := truth.ConfigMaps(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	hist := &History{}
	if err := hist.Seed(objs); err != nil {
		t.Fatal(err)
	}
	return hist
}
