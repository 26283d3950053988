package devcluster_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kgate/kgate/deploy/devcluster"
)

// event is what an informer handler saw, or what the writes predict.
type event struct {
	Type    string // ADDED, MODIFIED, DELETED, DELETED-UNKNOWN
	Initial bool   // an ADDED of the initial list
	Name    string
	RV      string
	Data    string
}

func (e event) String() string {
	return fmt.Sprintf("%s %s rv=%s data=%s initial=%v", e.Type, e.Name, e.RV, e.Data, e.Initial)
}

func cmEvent(typ string, cm *corev1.ConfigMap) event {
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s;", k, cm.Data[k])
	}
	return event{Type: typ, Name: cm.Name, RV: cm.ResourceVersion, Data: b.String()}
}

// recorder is an informer event handler keeping every event in order,
// except those of fence objects (named fencePrefix...): a fence's
// DELETED is sent on fenced instead.
type recorder struct {
	mu     sync.Mutex // guards events
	events []event
	fenced chan string
	// fence writes a fence object, deletes it and returns its name.
	fence func() string
}

// fencePrefix names the objects recorder.waitFor writes after the
// writes it waits for.
const fencePrefix = "fence-"

func (r *recorder) add(e event) {
	if strings.HasPrefix(e.Name, fencePrefix) {
		if e.Type == "DELETED" {
			r.fenced <- e.Name
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// waitFor waits until the events of every write so far arrived, extra
// ones included, and returns them: it writes a fence and waits for its
// DELETED, which an informer delivers after every earlier event. n is
// how many events the caller expects, for the message of a fence that
// does not come.
func (r *recorder) waitFor(t *testing.T, n int) []event {
	t.Helper()
	name := r.fence()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case got := <-r.fenced:
			if got != name {
				continue // an earlier fence
			}
		case <-timeout:
			t.Logf("fence %s not seen after 15s; %d of %d events", name, len(r.snapshot()), n)
		}
		return r.snapshot()
	}
}

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			e := cmEvent("ADDED", obj.(*corev1.ConfigMap))
			e.Initial = initial
			r.add(e)
		},
		UpdateFunc: func(_, obj any) { r.add(cmEvent("MODIFIED", obj.(*corev1.ConfigMap))) },
		DeleteFunc: func(obj any) {
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				r.add(cmEvent("DELETED", o))
			case cache.DeletedFinalStateUnknown:
				e := event{Type: "DELETED-UNKNOWN", Name: o.Key}
				if cm, ok := o.Obj.(*corev1.ConfigMap); ok {
					e = cmEvent("DELETED-UNKNOWN", cm)
				}
				r.add(e)
			}
		},
	}
}

// TestInformerConfigMaps runs a ConfigMap informer in both formats, with
// client-go's WatchListClient on and off, and compares the events it sees
// with the writes' resourceVersions.
func TestInformerConfigMaps(t *testing.T) {
	c := cluster(t)
	for _, format := range []string{"protobuf", "json"} {
		for _, watchList := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/watchlist=%v", format, watchList), func(t *testing.T) {
				clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
				testInformer(t, c, format == "json", watchList)
			})
		}
	}
}

func testInformer(t *testing.T, c *devcluster.Cluster, json, watchList bool) {
	ctx := context.Background()
	ns := uniqueNS(fmt.Sprintf("informer-%v-%v", map[bool]string{true: "json", false: "proto"}[json], watchList))
	var w wire
	cs := clientset(t, c, json, &w)
	ensureNamespace(t, cs, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	mk := func(name, v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": v}}
	}
	var want []event
	create := func(name, v string) *corev1.ConfigMap {
		t.Helper()
		out, err := cms.Create(ctx, mk(name, v), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return out
	}
	update := func(cm *corev1.ConfigMap, v string) *corev1.ConfigMap {
		t.Helper()
		cm = cm.DeepCopy()
		cm.Data["k"] = v
		out, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update %s: %v", cm.Name, err)
		}
		return out
	}
	del := func(cm *corev1.ConfigMap) event {
		t.Helper()
		if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", cm.Name, err)
		}
		rv := cm.ResourceVersion
		var after int64
		fmt.Sscan(rv, &after)
		e := cmEvent("DELETED", cm)
		// kube-apiserver sends a deleted object with the revision of its
		// deletion.
		e.RV = fmt.Sprint(deleteRevision(t, c, "/registry/configmaps/"+ns+"/"+cm.Name, after))
		return e
	}

	// The initial list.
	c0 := create("cm-0", "zero")
	c1 := create("cm-1", "one")
	initial := []event{cmEvent("ADDED", c0), cmEvent("ADDED", c1)}
	for i := range initial {
		initial[i].Initial = true
	}

	listsBefore := requestCount(t, c, "LIST", "configmaps")
	watchesBefore := requestCount(t, c, "WATCH", "configmaps")
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	fences := 0
	rec := &recorder{fenced: make(chan string, 4), fence: func() string {
		t.Helper()
		fences++
		cm := create(fmt.Sprintf("%s%d", fencePrefix, fences), "")
		if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", cm.Name, err)
		}
		return cm.Name
	}}
	if _, err := inf.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	syncCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync; requests:\n%s", typ, strings.Join(w.all(), "\n"))
		}
	}
	got := rec.waitFor(t, len(initial))
	sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
	// The reflector's first LIST asks for resourceVersion 0 ("any"): an
	// object written just before may come as a watch ADDED instead.
	if d := cmp.Diff(initial, got, cmpopts.IgnoreFields(event{}, "Initial")); d != "" {
		t.Fatalf("initial events (-want +got):\n%s", d)
	}
	for _, e := range got {
		if !e.Initial {
			t.Logf("%s came after the initial list (the list at resourceVersion 0 predates it)", e.Name)
		}
	}
	lists := requestCount(t, c, "LIST", "configmaps") - listsBefore
	watches := requestCount(t, c, "WATCH", "configmaps") - watchesBefore
	var sendInitial int
	for _, l := range w.all() {
		if strings.Contains(l, "/configmaps?") && strings.Contains(l, "sendInitialEvents=true") {
			sendInitial++
		}
	}
	path := "LIST+WATCH"
	if lists == 0 && sendInitial > 0 {
		path = "WatchList (watch?sendInitialEvents=true)"
	}
	t.Logf("informer path: %s (gateway metrics: %v LIST, %v WATCH of configmaps; %d sendInitialEvents requests)", path, lists, watches, sendInitial)
	if watchList && lists != 0 {
		t.Errorf("WatchListClient on: the informer made %v LIST requests, want a WatchList; requests:\n%s", lists, strings.Join(w.all(), "\n"))
	}
	if !watchList && (lists == 0 || sendInitial != 0) {
		t.Errorf("WatchListClient off: %v LIST and %d sendInitialEvents requests, want LIST+WATCH", lists, sendInitial)
	}

	// Changes after the sync, in order.
	a := create("cm-a", "v1")
	want = append(want, cmEvent("ADDED", a))
	a = update(a, "v2")
	want = append(want, cmEvent("MODIFIED", a))
	b := create("cm-b", "b1")
	want = append(want, cmEvent("ADDED", b))
	c0 = update(c0, "zero-2")
	want = append(want, cmEvent("MODIFIED", c0))
	want = append(want, del(c1))
	want = append(want, del(a))
	a = create("cm-a", "v3")
	want = append(want, cmEvent("ADDED", a))
	b = update(b, "b2")
	want = append(want, cmEvent("MODIFIED", b))
	b = update(b, "b3")
	want = append(want, cmEvent("MODIFIED", b))

	got = rec.waitFor(t, len(initial)+len(want))[len(initial):]
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events after sync (-want +got):\n%s\nrequests:\n%s", d, strings.Join(w.all(), "\n"))
	}

	// The informer's store ends as the API does.
	var store []event
	for _, o := range inf.GetStore().List() {
		store = append(store, cmEvent("", o.(*corev1.ConfigMap)))
	}
	sort.Slice(store, func(i, j int) bool { return store[i].Name < store[j].Name })
	final := []event{cmEvent("", c0), cmEvent("", a), cmEvent("", b)}
	if d := cmp.Diff(final, store); d != "" {
		t.Errorf("informer store (-want +got):\n%s", d)
	}
	checkWireFormat(t, w.all())
}

// checkWireFormat checks that every successful answer came in the first
// media type the request accepted: protobuf for typed clients by default,
// JSON when configured.
func checkWireFormat(t *testing.T, lines []string) {
	t.Helper()
	n := 0
	for _, l := range lines {
		if !strings.Contains(l, "/configmaps") && !strings.Contains(l, "/pods") {
			continue
		}
		req, resp, ok := strings.Cut(l, " -> ")
		if !ok || !strings.HasPrefix(resp, "2") {
			continue // a transport error, or an error Status
		}
		_, accept, _ := strings.Cut(req, " accept=")
		accept, _, _ = strings.Cut(accept, " ")
		want, _, _ := strings.Cut(accept, ",")
		if _, ct, _ := strings.Cut(resp, " "); !strings.HasPrefix(ct, want) {
			t.Errorf("response not in %s: %s", want, l)
		}
		n++
	}
	if n == 0 {
		t.Errorf("no successful requests recorded")
	}
}
