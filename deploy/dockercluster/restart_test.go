package dockercluster_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/deploy/dockercluster"
	"github.com/kgate/kgate/deploy/watchcheck"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

const loadNS = "load"

// failures collects the requests that failed; every one fails the test.
type failures struct {
	mu   sync.Mutex // guards errs, n
	errs []string
	n    int
}

func (f *failures) add(what string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.errs) < 20 {
		f.errs = append(f.errs, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), what, err))
	}
}

func (f *failures) report(t *testing.T, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		t.Errorf("%d failed %s:\n%s", f.n, what, joinLines(f.errs))
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}

// rollingRestart restarts each gateway in turn — SIGTERM, its shutdown
// delay, drain, exit, start again, ready — while a writer changes
// ConfigMaps, a reader reads them and watchers watch them, all through
// a client-side round-robin over both gateways. No request may fail;
// every watch stream, resumed from where the last one ended, must equal
// what the acknowledged writes imply (watchcheck), and every stream a
// gateway ended must end with a bookmark. The writes are checked
// against etcd's history at the end.
func rollingRestart(t *testing.T, ctx context.Context, c *dockercluster.Cluster) {
	admin, _ := balanced(t, c, "dockercluster/admin")
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: loadNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	truth := newTruth(t, c)
	_, from, err := truth.ConfigMaps(ctx, loadNS, 0)
	if err != nil {
		t.Fatal(err)
	}
	hist := &watchcheck.History{}
	var writeFails, readFails, watchFails failures

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var load sync.WaitGroup
	wcs, wrr := balanced(t, c, "dockercluster/writer")
	wr := &writer{cs: wcs, truth: truth, hist: hist, fails: &writeFails, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), model: map[string]*watchcheck.Object{}}
	load.Go(func() { wr.run(loadCtx) })
	rcs, rrr := balanced(t, c, "dockercluster/reader")
	reads := 0
	load.Go(func() { reads = readLoop(loadCtx, rcs, &readFails) })

	specs := []struct{ ns, label, field string }{
		{loadNS, "", ""},
		{loadNS, "app=a", ""},
		{"", "", "metadata.namespace=" + loadNS},
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watching sync.WaitGroup
	watchers := make([]*watcher, len(specs))
	for i, s := range specs {
		f, err := watchcheck.ParseFilter(s.ns, s.label, s.field)
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := balanced(t, c, fmt.Sprintf("dockercluster/watcher-%d", i))
		watchers[i] = &watcher{id: i, cs: cs, ns: s.ns, label: s.label, field: s.field, filter: f, fails: &watchFails, through: from}
		watching.Go(func() { watchers[i].run(watchCtx) })
	}

	// progress waits for n more acknowledged writes and for every watcher
	// to have seen all it selects of them.
	progress := func(what string, n int) {
		t.Helper()
		target := len(hist.Writes()) + n
		storagetest.Eventually(t, 2*time.Minute, what, func() error {
			ws := hist.Writes()
			if len(ws) < target {
				return fmt.Errorf("%d of %d writes", len(ws), target)
			}
			for _, w := range watchers {
				if err := w.caughtUp(ws[:target]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	progress("load before the restarts", 30)
	for i := range c.GatewayAddrs() {
		t0 := time.Now()
		before := len(hist.Writes())
		// SIGTERM; the gateway keeps serving for its shutdown delay, then
		// drains; docker stop returns once it exited.
		if err := c.Stop(ctx, dockercluster.Gateway, i, time.Minute); err != nil {
			t.Fatal(err)
		}
		stopped := time.Since(t0)
		if err := c.StartMember(ctx, dockercluster.Gateway, i); err != nil {
			t.Fatal(err)
		}
		t.Logf("gateway %d: stopped in %v, ready again after %v; %d writes meanwhile", i, stopped.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), len(hist.Writes())-before)
		progress(fmt.Sprintf("load after restarting gateway %d", i), 30)
	}
	stopLoad()
	load.Wait()
	writes := hist.Writes()
	last := writes[len(writes)-1].Rev
	storagetest.Eventually(t, time.Minute, "the watchers catch up", func() error {
		for _, w := range watchers {
			if err := w.caughtUp(writes); err != nil {
				return err
			}
		}
		return nil
	})
	stopWatch()
	watching.Wait()

	writeFails.report(t, "writes")
	readFails.report(t, "reads")
	watchFails.report(t, "watch requests")
	if err := wr.verify(ctx); err != nil {
		t.Errorf("the acknowledged writes disagree with etcd: %v", err)
	}
	for _, w := range watchers {
		segs := w.segments()
		delivered, bookmarks := 0, 0
		for k, seg := range segs {
			v, err := w.filter.Check(writes, seg)
			if err != nil {
				t.Errorf("watcher %d (%s), watch #%d from %s: %v", w.id, w.desc(), k, seg.Start, err)
				continue
			}
			delivered += v.Delivered
			bookmarks += v.Bookmarks
			if k < len(segs)-1 && (len(seg.Events) == 0 || seg.Events[len(seg.Events)-1].Type != "BOOKMARK") {
				t.Errorf("watcher %d (%s), watch #%d from %s ended without a final bookmark (%d events)", w.id, w.desc(), k, seg.Start, len(seg.Events))
			}
		}
		want := len(w.filter.Expected(writes, from))
		if delivered != want {
			t.Errorf("watcher %d (%s): %d events delivered over %d watches, the writes imply %d", w.id, w.desc(), delivered, len(segs), want)
		}
		// Both gateways ended a stream of every watcher: it moved twice.
		if len(segs) < 3 {
			t.Errorf("watcher %d (%s): %d watch requests; every restart should have moved it", w.id, w.desc(), len(segs))
		}
		t.Logf("watcher %d (%s): %d events and %d bookmarks over %d watches, in order, none lost", w.id, w.desc(), delivered, bookmarks, len(segs))
	}
	t.Logf("%d writes up to revision %d, %d reads; connections refused and sent to the other gateway: writer %d+%d, reader %d+%d (refused + closed by the port proxy)",
		len(writes), last, reads, wrr.Refused.Load(), wrr.ProxyRefused.Load(), rrr.Refused.Load(), rrr.ProxyRefused.Load())
}

// newTruth reads ConfigMaps from the cluster's etcd.
func newTruth(t *testing.T, c *dockercluster.Cluster) *watchcheck.Truth {
	t.Helper()
	cli, err := c.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if !ok {
		t.Fatal("no configmaps in the registry")
	}
	return &watchcheck.Truth{Etcd: cli, Codec: codec.New(reg.Scheme()), Resource: res}
}

// readLoop GETs and LISTs ConfigMaps until ctx ends; a NotFound is an
// answer, every other error a failure. It returns the number of reads.
func readLoop(ctx context.Context, cs kubernetes.Interface, fails *failures) int {
	n := 0
	for ctx.Err() == nil {
		var err error
		if n%3 == 0 {
			_, err = cs.CoreV1().ConfigMaps(loadNS).List(ctx, metav1.ListOptions{})
		} else {
			_, err = cs.CoreV1().ConfigMaps(loadNS).Get(ctx, fmt.Sprintf("cm-%d", n%names), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		}
		if err != nil && ctx.Err() == nil {
			fails.add("read", err)
		}
		n++
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return n
}

// names is how many ConfigMaps the writer changes.
const names = 8

// writer changes ConfigMaps one at a time and records every acknowledged
// write; a write that fails is a failure (and settled from etcd so the
// history stays exact).
type writer struct {
	cs    kubernetes.Interface
	truth *watchcheck.Truth
	hist  *watchcheck.History
	fails *failures
	rng   *rand.Rand
	model map[string]*watchcheck.Object // by name: what the writer knows is stored
	seq   int
}

func (w *writer) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := w.step(ctx); err != nil {
			w.fails.add("write", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Millisecond):
		}
	}
}

func (w *writer) labels() map[string]string {
	switch w.rng.IntN(3) {
	case 0:
		return map[string]string{"app": "a"}
	case 1:
		return map[string]string{"app": "b"}
	}
	return nil
}

// step makes one write; it is not cancelled with ctx, so that no write
// is left with an unknown outcome.
func (w *writer) step(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("cm-%d", w.rng.IntN(names))
	cur := w.model[name]
	w.seq++
	var (
		out *corev1.ConfigMap
		err error
		op  = watchcheck.Create
	)
	switch {
	case cur == nil:
		out, err = w.cs.CoreV1().ConfigMaps(loadNS).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: w.labels()}, Data: map[string]string{"v": strconv.Itoa(w.seq)},
		}, metav1.CreateOptions{})
	case w.rng.IntN(4) == 0:
		return w.delete(ctx, cur)
	default:
		op = watchcheck.Update
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: loadNS, ResourceVersion: strconv.FormatInt(cur.RV, 10), Labels: maps.Clone(cur.Labels)},
			Data:       map[string]string{"v": strconv.Itoa(w.seq)},
		}
		if w.rng.IntN(2) == 0 {
			cm.Labels = w.labels()
		}
		out, err = w.cs.CoreV1().ConfigMaps(loadNS).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return errors.Join(fmt.Errorf("%s %s: %w", op, name, err), w.settle(ctx, name))
	}
	o, err := watchcheck.ObjectOf(out)
	if err != nil {
		return err
	}
	return w.add(watchcheck.Write{Rev: o.RV, Op: op, Prev: cur, Cur: o})
}

func (w *writer) delete(ctx context.Context, cur *watchcheck.Object) error {
	rv := strconv.FormatInt(cur.RV, 10)
	obj, err := w.cs.CoreV1().RESTClient().Delete().Namespace(loadNS).Resource("configmaps").Name(cur.Name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}).Do(ctx).Get()
	if err != nil {
		return errors.Join(fmt.Errorf("delete %s: %w", cur.Name, err), w.settle(ctx, cur.Name))
	}
	var rev int64
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		o, err := watchcheck.ObjectOf(cm)
		if err != nil {
			return err
		}
		rev = o.RV
	} else if rev, err = w.truth.DeleteRevision(ctx, cur); err != nil {
		return err
	}
	return w.add(watchcheck.Write{Rev: rev, Op: watchcheck.Delete, Prev: cur})
}

func (w *writer) add(wr watchcheck.Write) error {
	if err := w.hist.Insert(wr); err != nil {
		return err
	}
	if wr.Cur == nil {
		delete(w.model, wr.Prev.Name)
	} else {
		w.model[wr.Cur.Name] = wr.Cur
	}
	return nil
}

// settle records what etcd has of name after a failed write, so that
// the history (and the watch checks) stay exact after a failure.
func (w *writer) settle(ctx context.Context, name string) error {
	prev := w.model[name]
	now, _, err := w.truth.ConfigMap(ctx, loadNS, name, 0)
	if err != nil {
		return err
	}
	switch {
	case now == nil && prev == nil, now != nil && prev != nil && now.RV == prev.RV:
		return nil
	case now == nil:
		rev, err := w.truth.DeleteRevision(ctx, prev)
		if err != nil {
			return err
		}
		return w.add(watchcheck.Write{Rev: rev, Op: watchcheck.Delete, Prev: prev})
	case prev == nil:
		return w.add(watchcheck.Write{Rev: now.RV, Op: watchcheck.Create, Cur: now})
	}
	return w.add(watchcheck.Write{Rev: now.RV, Op: watchcheck.Update, Prev: prev, Cur: now})
}

// verify checks every recorded write against etcd's history at its
// revision, and the final state against etcd's.
func (w *writer) verify(ctx context.Context) error {
	writes := w.hist.Writes()
	for i := range writes {
		wr := &writes[i]
		at, _, err := w.truth.ConfigMap(ctx, loadNS, wr.Key()[len(loadNS)+1:], wr.Rev)
		if err != nil {
			return err
		}
		switch {
		case wr.Cur != nil && (at == nil || !same(at, wr.Cur)):
			return fmt.Errorf("%s %s at %d: etcd has %+v there", wr.Op, wr.Key(), wr.Rev, at)
		case wr.Cur == nil && at != nil:
			return fmt.Errorf("delete of %s at %d: etcd still has %+v there", wr.Key(), wr.Rev, at)
		}
	}
	got, _, err := w.truth.ConfigMaps(ctx, loadNS, 0)
	if err != nil {
		return err
	}
	want := watchcheck.StateAt(writes, 1<<62)
	if len(got) != len(want) {
		return fmt.Errorf("etcd has %d ConfigMaps, the history %d", len(got), len(want))
	}
	for k, o := range got {
		if m := want[k]; m == nil || !same(m, o) {
			return fmt.Errorf("etcd has %s %+v, the history %+v", k, o, m)
		}
	}
	return nil
}

func same(a, b *watchcheck.Object) bool {
	return a.Key() == b.Key() && a.RV == b.RV && a.Data == b.Data && maps.Equal(a.Labels, b.Labels)
}

// watcher watches ConfigMaps with bookmarks, from a revision, and when a
// stream ends resumes from the last revision it saw — on the other
// gateway, as its round-robin moves on. Each watch request is a segment
// for watchcheck.
type watcher struct {
	id               int
	cs               kubernetes.Interface
	ns, label, field string
	filter           watchcheck.Filter
	fails            *failures
	mu               sync.Mutex // guards segs, through
	segs             []*watchcheck.Segment
	through          int64 // the newest revision seen
}

func (w *watcher) desc() string {
	return fmt.Sprintf("ns=%q label=%q field=%q", w.ns, w.label, w.field)
}

func (w *watcher) run(ctx context.Context) {
	timeout := int64(600) // streams end only when a gateway drains
	for ctx.Err() == nil {
		w.mu.Lock()
		seg := &watchcheck.Segment{Start: strconv.FormatInt(w.through, 10), Began: time.Now()}
		w.segs = append(w.segs, seg)
		w.mu.Unlock()
		wi, err := w.cs.CoreV1().ConfigMaps(w.ns).Watch(ctx, metav1.ListOptions{
			ResourceVersion: seg.Start, AllowWatchBookmarks: true, LabelSelector: w.label, FieldSelector: w.field, TimeoutSeconds: &timeout,
		})
		if err != nil {
			if ctx.Err() == nil {
				w.fails.add(fmt.Sprintf("watch %d from %s", w.id, seg.Start), err)
				// Resume at once: the next attempt goes to the other gateway.
			}
			continue
		}
		for ev := range wi.ResultChan() {
			e := watchcheck.EventOf(ev)
			w.mu.Lock()
			seg.Events = append(seg.Events, e)
			if e.Type != "ERROR" && e.RV > w.through {
				w.through = e.RV
			}
			w.mu.Unlock()
		}
		wi.Stop()
	}
	w.mu.Lock()
	if n := len(w.segs); n > 0 {
		w.segs[n-1].Complete = true
	}
	w.mu.Unlock()
}

// caughtUp: the watcher has seen every write it selects among writes.
func (w *watcher) caughtUp(writes []watchcheck.Write) error {
	want := w.filter.Expected(writes, 0)
	if len(want) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if last := want[len(want)-1].RV; w.through < last {
		return fmt.Errorf("watcher %d at revision %d, its last write at %d", w.id, w.through, last)
	}
	return nil
}

func (w *watcher) segments() []*watchcheck.Segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.segs
}
