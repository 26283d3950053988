package watchcheck

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/storagetest"
)

var gizmos = gizmoGVK.GroupVersion().WithResource("gizmos")

// TestCustomResourceFailover is the watch contract on a custom resource
// through a cache-node kill: three cache nodes (two replicas per range),
// two gateways, a CRD created through the API, one writer changing Gizmos
// (creates, spec and label updates, deletes) and watchers on both
// gateways — by namespace and cluster-wide, with and without a label
// selector, from a revision and from the current state — while the node
// publishing the Gizmos range is killed and later started again. The
// other replica holds the whole run in its window, so no 410 is
// justified: every stream must be exactly what the acknowledged writes
// imply (nothing lost, duplicated or reordered).
func TestCustomResourceFailover(t *testing.T) {
	m := startMulti(t, MultiConfig{CacheNodes: 3, Gateways: 2, Replicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dyns := make([]dynamic.Interface, 2)
	var cs kubernetes.Interface
	for i := range dyns {
		cfg, err := m.RESTConfig(m.GatewayAddr(i), "watchcheck-customresource", false)
		if err != nil {
			t.Fatal(err)
		}
		if dyns[i], err = dynamic.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			cs = newClientset(t, cfg)
		}
	}
	crd, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gizmoCRD())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyns[0].Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")).
		Create(ctx, &unstructured.Unstructured{Object: crd}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the CRD: %v", err)
	}
	namespaces := []string{"cr-a", "cr-b"}
	createNamespaces(ctx, t, cs, namespaces...)
	rangeID := ranges.IDFor("/registry/" + gizmos.Group + "/" + gizmos.Resource)
	var startRev int64
	storagetest.Eventually(t, 30*time.Second, "gizmos served by both gateways, their range by two cache nodes", func() error {
		for i, d := range dyns {
			l, err := d.Resource(gizmos).List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("gateway %d: %w", i, err)
			}
			if startRev, err = strconv.ParseInt(l.GetResourceVersion(), 10, 64); err != nil {
				return err
			}
		}
		if owners := m.Owners(rangeID); len(owners) != 2 {
			return fmt.Errorf("range %s held by %v", rangeID, owners)
		}
		return nil
	})

	hist := &History{}
	type spec struct{ ns, label string }
	var watchers []*crWatcher
	specs := []spec{{"", ""}, {"cr-a", ""}, {"", "app=x"}, {"cr-b", "app=y"}}
	for _, s := range specs {
		for g := range dyns {
			watchers = append(watchers, startCRWatcher(ctx, t, dyns[g], s.ns, s.label, strconv.FormatInt(startRev, 10), 0))
		}
	}

	w := &crWriter{dyn: dyns[0], rc: cs.CoreV1().RESTClient(), etcd: m.Etcd, hist: hist, rng: rand.New(rand.NewPCG(seed(t), 2)), namespaces: namespaces, model: map[string]*Object{}}
	wctx, stopWrites := context.WithCancel(ctx)
	written := make(chan error, 1)
	go func() { written <- w.run(wctx, 100) }()

	// The fault: once a third of the writes are in, the node that
	// publishes the range dies; later it comes back.
	waitWrites := func(n int) {
		storagetest.Eventually(t, time.Minute, fmt.Sprintf("%d writes", n), func() error {
			select {
			case err := <-written:
				t.Fatalf("the writer stopped after %d writes: %v", len(hist.Writes()), err)
			default:
			}
			if got := len(hist.Writes()); got < n {
				return fmt.Errorf("%d writes", got)
			}
			return nil
		})
	}
	// Watchers that start with the current state, once there is some.
	waitWrites(50)
	for i, s := range specs {
		watchers = append(watchers, startCRWatcher(ctx, t, dyns[i%2], s.ns, s.label, "", hist.LastRev()))
	}
	waitWrites(100)
	victim := m.Primary(rangeID)
	t.Logf("killing cache node %d, primary of %s, at write %d", victim, rangeID, len(hist.Writes()))
	if err := m.KillNode(victim); err != nil {
		t.Fatal(err)
	}
	waitWrites(200)
	if err := m.StartNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitWrites(300)
	stopWrites()
	if err := <-written; err != nil {
		t.Fatalf("writer: %v", err)
	}
	writes := hist.Writes()

	for _, cw := range watchers {
		cw.waitThrough(t, writes)
	}
	for _, cw := range watchers {
		cw.stop()
		seg := cw.segment()
		if n := len(seg.Events); n > 0 && seg.Events[n-1].Type == "ERROR" {
			t.Errorf("watch %s ended with %s: a replica held the whole run", cw, &seg.Events[n-1])
		}
		v, err := cw.filter.Check(writes, seg)
		if err != nil {
			t.Errorf("watch %s: %v", cw, err)
			continue
		}
		t.Logf("watch %s: snapshot %d, %d initial, %d delivered, %d bookmarks", cw, v.Snapshot, v.Initial, v.Delivered, v.Bookmarks)
	}
}

// crWriter changes Gizmos at random, one write at a time, and records
// every acknowledged write: a create or update answers with the new
// object, a delete with the last state at the delete's revision (as
// upstream answers a custom resource's delete). Any error fails the run:
// writes go to etcd, which no fault here touches.
type crWriter struct {
	dyn        dynamic.Interface
	rc         rest.Interface // for deletes: the dynamic client drops their answer
	etcd       *clientv3.Client
	hist       *History
	rng        *rand.Rand
	namespaces []string
	model      map[string]*Object
	seq        int
}

func (w *crWriter) run(ctx context.Context, rate int) error {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// A step is not cut off by the end of the run: every write
		// made is recorded.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err := w.step(sctx)
		cancel()
		if err != nil {
			return err
		}
	}
}

func (w *crWriter) labels() map[string]string {
	if r := w.rng.IntN(3); r < 2 {
		return map[string]string{"app": []string{"x", "y"}[r]}
	}
	return nil
}

func (w *crWriter) step(ctx context.Context) error {
	ns := w.namespaces[w.rng.IntN(len(w.namespaces))]
	name := fmt.Sprintf("g-%d", w.rng.IntN(6))
	cur := w.model[ns+"/"+name]
	w.seq++
	res := w.dyn.Resource(gizmos).Namespace(ns)
	if cur == nil {
		out, err := res.Create(ctx, gizmo(ns, name, "", w.labels(), w.seq), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("cannot create %s/%s: %w", ns, name, err)
		}
		return w.add(Create, cur, out)
	}
	if w.rng.IntN(4) == 0 {
		rv := strconv.FormatInt(cur.RV, 10)
		raw, err := w.rc.Delete().AbsPath("/apis", gizmos.Group, gizmos.Version, "namespaces", ns, gizmos.Resource, name).
			Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("cannot delete %s/%s: %w", ns, name, err)
		}
		if out := (&unstructured.Unstructured{}); out.UnmarshalJSON(raw) == nil && out.GetKind() == gizmoGVK.Kind {
			return w.add(Delete, cur, out) // the deleted object at the delete's revision
		}
		// Upstream answers a Status: the delete's revision is the first
		// after cur's at which etcd no longer has the key (only this
		// writer writes it).
		rev, err := firstAbsent(ctx, w.etcd, "/registry/"+gizmos.Group+"/"+gizmos.Resource+"/"+ns+"/"+name, cur.RV+1)
		if err != nil {
			return err
		}
		gone := *cur
		gone.RV = rev
		return w.add(Delete, cur, &gone)
	}
	ls := maps.Clone(cur.Labels)
	size, _ := strconv.Atoi(cur.Data)
	if w.rng.IntN(2) == 0 {
		ls = w.labels()
	} else {
		size = w.seq
	}
	out, err := res.Update(ctx, gizmo(ns, name, strconv.FormatInt(cur.RV, 10), ls, size), metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("cannot update %s/%s: %w", ns, name, err)
	}
	return w.add(Update, cur, out)
}

// firstAbsent is the first revision from lo on at which etcd does not
// have key (a binary search over etcd's history).
func firstAbsent(ctx context.Context, etcd *clientv3.Client, key string, lo int64) (int64, error) {
	resp, err := etcd.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) > 0 {
		return 0, fmt.Errorf("%s is still in etcd after its delete", key)
	}
	hi := resp.Header.Revision // the answer lies in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		r, err := etcd.Get(ctx, key, clientv3.WithRev(mid))
		if err != nil {
			return 0, err
		}
		if len(r.Kvs) == 0 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

func (w *crWriter) add(op Op, prev *Object, out any) error {
	var o *Object
	switch out := out.(type) {
	case *Object:
		o = out
	case *unstructured.Unstructured:
		var err error
		if o, err = gizmoObject(out); err != nil {
			return err
		}
	}
	if op == Update && o.RV == prev.RV {
		return nil // an update that changed nothing wrote nothing
	}
	wr := Write{Rev: o.RV, Op: op, Prev: prev, Cur: o}
	if op == Delete {
		wr.Cur = nil
	}
	if err := w.hist.Insert(wr); err != nil {
		return err
	}
	if op == Delete {
		delete(w.model, o.Key())
	} else {
		w.model[o.Key()] = o
	}
	return nil
}

func gizmo(ns, name, rv string, ls map[string]string, size int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(size)}}}
	u.SetGroupVersionKind(gizmoGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion(rv)
	u.SetLabels(ls)
	return u
}

// gizmoObject is what the checks compare of a Gizmo: Data is spec.size.
func gizmoObject(u *unstructured.Unstructured) (*Object, error) {
	rv, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad resourceVersion %q of %s/%s: %w", u.GetResourceVersion(), u.GetNamespace(), u.GetName(), err)
	}
	size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
	var ls map[string]string
	if l := u.GetLabels(); len(l) > 0 {
		ls = l
	}
	return &Object{Namespace: u.GetNamespace(), Name: u.GetName(), Labels: ls, Data: strconv.FormatInt(size, 10), RV: rv}, nil
}

// crWatcher is one watch of Gizmos, recorded as one segment.
type crWatcher struct {
	filter    Filter
	ns, label string
	start     string
	notBefore int64
	cancel    context.CancelFunc
	done      chan struct{}

	mu     sync.Mutex
	events []Event
}

func (w *crWatcher) String() string {
	return fmt.Sprintf("ns=%q label=%q from %q", w.ns, w.label, w.start)
}

func startCRWatcher(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, label, start string, notBefore int64) *crWatcher {
	t.Helper()
	f, err := ParseFilter(ns, label, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &crWatcher{filter: f, ns: ns, label: label, start: start, notBefore: notBefore, cancel: cancel, done: make(chan struct{})}
	wi, err := dyn.Resource(gizmos).Namespace(ns).Watch(ctx, metav1.ListOptions{LabelSelector: label, ResourceVersion: start, AllowWatchBookmarks: true})
	if err != nil {
		cancel()
		t.Fatalf("cannot watch %s: %v", w, err)
	}
	go func() {
		defer close(w.done)
		defer wi.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-wi.ResultChan():
				if !ok {
					return
				}
				if ctx.Err() != nil {
					// Stopped by the test: client-go reports the
					// cancelled body read as an ERROR event ("unable
					// to decode an event from the watch stream:
					// context canceled"), which is not the server's.
					return
				}
				w.mu.Lock()
				w.events = append(w.events, crEvent(ev))
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func crEvent(ev watch.Event) Event {
	e := Event{Type: string(ev.Type)}
	switch o := ev.Object.(type) {
	case *unstructured.Unstructured:
		obj, err := gizmoObject(o)
		if err != nil {
			return Event{Type: "ERROR", Message: err.Error()}
		}
		e.Namespace, e.Name, e.RV, e.Labels, e.Data = obj.Namespace, obj.Name, obj.RV, obj.Labels, obj.Data
		e.InitialEnd = o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
	case *metav1.Status:
		e.Code, e.Message = o.Code, o.Message
	default:
		e.Type, e.Message = "ERROR", fmt.Sprintf("unexpected object %T in a %s event", ev.Object, ev.Type)
	}
	return e
}

func (w *crWatcher) stop() {
	w.cancel()
	<-w.done
}

func (w *crWatcher) segment() *Segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return &Segment{Start: w.start, NotBefore: w.notBefore, Events: slices.Clone(w.events), Complete: true}
}

// waitThrough waits (at most 30s) until the watch has delivered the last
// write it selects, or ended.
func (w *crWatcher) waitThrough(t *testing.T, writes []Write) {
	t.Helper()
	var last int64
	for _, e := range w.filter.Expected(writes, 0) {
		last = e.RV
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-w.done:
			return
		default:
		}
		w.mu.Lock()
		seen := int64(0)
		for _, e := range w.events {
			if e.Type != "BOOKMARK" && e.RV > seen {
				seen = e.RV
			}
		}
		w.mu.Unlock()
		if seen >= last {
			return
		}
		time.Sleep(50 * time.Millisecond) // a poll of what the stream has delivered
	}
}
