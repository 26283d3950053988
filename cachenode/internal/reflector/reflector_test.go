package reflector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/internal/reflector"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type env struct {
	t     *testing.T
	eager bool
	etcd  *clientv3.Client
	reg   *registry.Registry
	codec *codec.Codec
	table *ranges.Table
	pods  *ranges.Range
}

func newEnv(t *testing.T) *env {
	storagetest.CheckGoroutines(t)
	c := storagetest.StartEtcd(t)
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	table, err := ranges.Default(reg)
	if err != nil {
		t.Fatal(err)
	}
	pods, ok := table.ByID("pods")
	if !ok {
		t.Fatal("no pods range")
	}
	return &env{t: t, etcd: c, reg: reg, codec: codec.New(reg.Scheme()), table: table, pods: pods}
}

func pod(ns, name, app, phase string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPhase(phase)},
	}
}

// put stores p as JSON (or protobuf) and returns the revision.
func (e *env) put(p *corev1.Pod, proto bool) int64 {
	e.t.Helper()
	var (
		b   []byte
		err error
	)
	if proto {
		b, err = e.codec.EncodeProtobuf(p)
	} else {
		b, err = e.codec.EncodeJSON(p)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.etcd.Put(context.Background(), e.pods.Resource.Key(p.Namespace, p.Name), string(b))
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Header.Revision
}

func (e *env) del(ns, name string) int64 {
	e.t.Helper()
	resp, err := e.etcd.Delete(context.Background(), e.pods.Resource.Key(ns, name))
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Header.Revision
}

// sink records what a reflector hands over.
type sink struct {
	mu       sync.Mutex
	events   []event.Event
	seen     int64
	restarts int
	from     int64 // revision of the last restart
}

func (s *sink) Event(ev *event.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, *ev)
}

func (s *sink) Seen(_ string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = rev
}

func (s *sink) Restart(_ string, from int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarts++
	s.from = from
}

func (s *sink) snapshot() ([]event.Event, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event.Event(nil), s.events...), s.restarts
}

// start runs a reflector over the pods range until the test ends.
func (e *env) start(snk reflector.Sink, hook func(*reflector.Reflector)) *reflector.Reflector {
	e.t.Helper()
	r, err := reflector.New(reflector.Config{
		Etcd: e.etcd, Range: e.pods, Registry: e.reg, Codec: e.codec, Sink: snk,
		PageSize: 3, ProgressInterval: 200 * time.Millisecond, Logger: storagetest.Logger(e.t), EagerProtobuf: e.eager,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if hook != nil {
		hook(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run = %v", err)
		}
	})
	return r
}

func waitFor(t *testing.T, r *reflector.Reflector, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, rev); err != nil {
		t.Fatal(err)
	}
}

type served struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

func decodeServed(t *testing.T, b []byte) served {
	t.Helper()
	var s served
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("served JSON %q: %v", b, err)
	}
	return s
}

func TestSyncExisting(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(fmt.Sprintf("eager protobuf %v", eager), func(t *testing.T) { testSyncExisting(t, eager) })
	}
}

func testSyncExisting(t *testing.T, eager bool) {
	e := newEnv(t)
	e.eager = eager
	var revs []int64
	for i := range 7 {
		revs = append(revs, e.put(pod("ns", fmt.Sprintf("p%d", i), "web", "Running"), i == 3))
	}
	r := e.start(nil, nil)
	waitFor(t, r, revs[len(revs)-1])
	if !r.Ready() {
		t.Fatal("not ready after sync")
	}
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Len() != 7 {
		t.Fatalf("store has %d objects", snap.Len())
	}
	for i, rev := range revs {
		en, ok := snap.Get(e.pods.Resource.Key("ns", fmt.Sprintf("p%d", i)))
		if !ok {
			t.Fatalf("p%d missing", i)
		}
		s := decodeServed(t, en.JSON)
		if s.Kind != "Pod" || s.APIVersion != "v1" || s.Metadata.ResourceVersion != strconv.FormatInt(rev, 10) || en.ModRevision != rev {
			t.Fatalf("p%d served as %+v (mod %d), want rv %d", i, s, en.ModRevision, rev)
		}
		want := map[string]string{"metadata.name": fmt.Sprintf("p%d", i), "metadata.namespace": "ns", "spec.nodeName": "node-1", "status.phase": "Running"}
		for k, v := range want {
			if en.Fields[k] != v {
				t.Fatalf("p%d field %s = %q, want %q", i, k, en.Fields[k], v)
			}
		}
		if en.Labels["app"] != "web" || en.Namespace != "ns" || en.Name != fmt.Sprintf("p%d", i) {
			t.Fatalf("p%d: labels %v ns %q name %q", i, en.Labels, en.Namespace, en.Name)
		}
		pb, err := en.Protobuf()
		if err != nil {
			t.Fatal(err)
		}
		var got corev1.Pod
		if err := got.Unmarshal(pb); err != nil {
			t.Fatal(err)
		}
		if got.Name != fmt.Sprintf("p%d", i) || got.ResourceVersion != strconv.FormatInt(rev, 10) || got.Spec.NodeName != "node-1" {
			t.Fatalf("protobuf of p%d: %+v", i, got.ObjectMeta)
		}
	}
}

func TestFollowsChanges(t *testing.T) {
	e := newEnv(t)
	e.put(pod("a", "old", "web", "Running"), false)
	snk := &sink{}
	r := e.start(snk, nil)
	waitFor(t, r, 1)

	type want struct {
		typ      event.Type
		rev      int64
		ns, name string
		phase    string
		prevRV   string
	}
	var wants []want
	add := func(typ event.Type, rev int64, ns, name, phase, prevRV string) {
		wants = append(wants, want{typ, rev, ns, name, phase, prevRV})
	}
	oldRev := e.put(pod("a", "old", "web", "Running"), false) // update of a listed object
	add(event.Modified, oldRev, "a", "old", "Running", "2")
	r1 := e.put(pod("a", "x", "web", "Pending"), false)
	add(event.Added, r1, "a", "x", "Pending", "")
	r2 := e.put(pod("b", "y", "db", "Pending"), true)
	add(event.Added, r2, "b", "y", "Pending", "")
	r3 := e.put(pod("a", "x", "web", "Running"), false)
	add(event.Modified, r3, "a", "x", "Running", strconv.FormatInt(r1, 10))
	r4 := e.del("a", "x")
	add(event.Deleted, r4, "a", "x", "Running", strconv.FormatInt(r3, 10))
	// a write elsewhere in etcd must not show up
	if _, err := e.etcd.Put(context.Background(), "/registry/configmaps/a/c", "{}"); err != nil {
		t.Fatal(err)
	}
	r5 := e.put(pod("b", "y", "db", "Failed"), true)
	add(event.Modified, r5, "b", "y", "Failed", strconv.FormatInt(r2, 10))
	waitFor(t, r, r5)

	got, restarts := snk.snapshot()
	if len(got) != len(wants) || restarts != 1 {
		t.Fatalf("got %d events and %d restarts, want %d and 1", len(got), restarts, len(wants))
	}
	snk.mu.Lock()
	lastRange := snk.from // chains start at the list revision
	snk.mu.Unlock()
	lastSubject := map[string]int64{"a": lastRange, "b": lastRange}
	for i, w := range wants {
		ev := got[i]
		s := decodeServed(t, ev.Object)
		if ev.Type != w.typ || ev.Revision != w.rev || ev.Namespace != w.ns || ev.Name != w.name || ev.Range != "pods" ||
			ev.Key != e.pods.Resource.Key(w.ns, w.name) || s.Status.Phase != w.phase {
			t.Fatalf("event %d = %v %d %s/%s %q, want %+v", i, ev.Type, ev.Revision, ev.Namespace, ev.Name, s.Status.Phase, w)
		}
		// Object carries the event revision, deletes included.
		if s.Metadata.ResourceVersion != strconv.FormatInt(w.rev, 10) {
			t.Fatalf("event %d object rv %s", i, s.Metadata.ResourceVersion)
		}
		if w.prevRV == "" {
			if ev.PrevObject != nil {
				t.Fatalf("event %d has a previous object", i)
			}
		} else if p := decodeServed(t, ev.PrevObject); p.Metadata.ResourceVersion != w.prevRV || ev.PrevLabels["app"] == "" || ev.PrevFields["metadata.name"] != w.name {
			t.Fatalf("event %d prev rv %s labels %v fields %v, want rv %s", i, p.Metadata.ResourceVersion, ev.PrevLabels, ev.PrevFields, w.prevRV)
		}
		if ev.PrevRangeRevision != lastRange || ev.PrevSubjectRevision != lastSubject[w.ns] {
			t.Fatalf("event %d chain (%d, %d), want (%d, %d)", i, ev.PrevRangeRevision, ev.PrevSubjectRevision, lastRange, lastSubject[w.ns])
		}
		lastRange, lastSubject[w.ns] = ev.Revision, ev.Revision
		if ev.Fields["metadata.namespace"] != w.ns || ev.Labels["app"] == "" {
			t.Fatalf("event %d fields %v labels %v", i, ev.Fields, ev.Labels)
		}
	}

	// the window holds the same events
	items, seen, err := r.Since(2, nil, 0) // listed at 2
	if err != nil || len(items) != len(wants) || seen < r5 {
		t.Fatalf("Since(2) = %d items, seen %d, %v", len(items), seen, err)
	}
	for i, it := range items {
		if !reflect.DeepEqual(it.Event, got[i]) {
			t.Fatalf("window event %d differs from the published one", i)
		}
	}
	snap, _ := r.Snapshot()
	if snap.Len() != 2 {
		t.Fatalf("store has %d objects", snap.Len())
	}
}

func TestWaitForQuietRange(t *testing.T) {
	e := newEnv(t)
	r := e.start(nil, nil)
	waitFor(t, r, 1)
	// etcd moves on elsewhere; the pods range stays quiet
	var rev int64
	for i := range 3 {
		resp, err := e.etcd.Put(context.Background(), fmt.Sprintf("/registry/configmaps/a/c%d", i), "{}")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	start := time.Now()
	waitFor(t, r, rev)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("WaitFor on a quiet range took %v", d)
	}
	if snap, _ := r.Snapshot(); snap.Revision < rev {
		t.Fatalf("snapshot at %d after WaitFor(%d)", snap.Revision, rev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.WaitFor(ctx, rev+100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor a future revision = %v", err)
	}
}

func TestRelistAfterCompaction(t *testing.T) {
	e := newEnv(t)
	e.put(pod("a", "p", "web", "Pending"), false)
	snk := &sink{}
	var once sync.Once
	var last int64
	hooked := make(chan struct{})
	r := e.start(snk, func(r *reflector.Reflector) {
		r.SetAfterList(func(rev int64) {
			once.Do(func() {
				// the watch from rev+1 will find its start compacted
				e.put(pod("a", "p", "web", "Running"), false)
				e.put(pod("a", "q", "web", "Running"), false)
				last = e.del("a", "p")
				if _, err := e.etcd.Compact(context.Background(), last); err != nil {
					t.Error(err)
				}
				close(hooked)
			})
		})
	})
	<-hooked
	waitFor(t, r, last)
	snap, _ := r.Snapshot()
	if _, ok := snap.Get(e.pods.Resource.Key("a", "p")); ok || snap.Len() != 1 {
		t.Fatalf("after relist: %d objects, deleted one present: %v", snap.Len(), ok)
	}
	_, restarts := snk.snapshot()
	if restarts != 2 {
		t.Fatalf("%d restarts, want 2", restarts)
	}
	if _, _, err := r.Since(last-1, nil, 0); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Since before the relist = %v", err)
	}
	// and it follows on from the new list
	rev := e.put(pod("a", "z", "web", "Running"), false)
	waitFor(t, r, rev)
	items, _, err := r.Since(last, nil, 0)
	snk.mu.Lock()
	from := snk.from
	snk.mu.Unlock()
	if err != nil || len(items) != 1 || items[0].PrevRangeRevision != from || from < last || items[0].Type != event.Added {
		t.Fatalf("Since(%d) = %v %v", last, items, err)
	}
}

func TestAtRewinds(t *testing.T) {
	e := newEnv(t)
	e.put(pod("a", "p0", "web", "Pending"), false)
	r := e.start(nil, nil)
	waitFor(t, r, 1)
	var revs []int64
	for i := range 12 {
		var rev int64
		switch i % 3 {
		case 0:
			rev = e.put(pod("a", fmt.Sprintf("p%d", i), "web", "Pending"), false)
		case 1:
			rev = e.put(pod("a", fmt.Sprintf("p%d", i-1), "web", "Running"), false)
		case 2:
			rev = e.del("a", fmt.Sprintf("p%d", i-2))
		}
		revs = append(revs, rev)
	}
	waitFor(t, r, revs[len(revs)-1])
	for _, rev := range revs[:len(revs)-1] {
		snap, err := r.At(rev)
		if err != nil {
			t.Fatalf("At(%d): %v", rev, err)
		}
		resp, err := e.etcd.Get(context.Background(), e.pods.Start, clientv3.WithRange(e.pods.End), clientv3.WithRev(rev))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := snap.List(nil, store.ListOptions{Prefix: e.pods.Start})
		if len(got) != len(resp.Kvs) || snap.Revision != rev {
			t.Fatalf("At(%d): %d objects at %d, etcd has %d", rev, len(got), snap.Revision, len(resp.Kvs))
		}
		for i, kv := range resp.Kvs {
			if got[i].Key != string(kv.Key) || got[i].ModRevision != kv.ModRevision {
				t.Fatalf("At(%d) item %d = %s@%d, etcd %s@%d", rev, i, got[i].Key, got[i].ModRevision, kv.Key, kv.ModRevision)
			}
		}
	}
	if _, err := r.At(revs[len(revs)-1] + 1000); !errors.Is(err, storage.ErrRevisionTooLarge) {
		t.Fatalf("At(future) = %v", err)
	}
	if _, err := r.At(0); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("At(before the list) = %v", err)
	}
}

// The consistency checker finds a store that lost an object (as a lost
// event would leave it), counts it and relists; values that do not decode,
// which the list skips, are no difference.
func TestConsistencyCheckRepairs(t *testing.T) {
	e := newEnv(t)
	e.put(pod("a", "p", "web", "Running"), false)
	if _, err := e.etcd.Put(context.Background(), e.pods.Resource.Key("a", "garbage"), "not an object"); err != nil {
		t.Fatal(err)
	}
	rev := e.put(pod("a", "q", "web", "Running"), false)
	snk := &sink{}
	r := e.start(snk, func(r *reflector.Reflector) { r.SetConsistencyInterval(time.Hour) })
	waitFor(t, r, rev)
	ctx := context.Background()
	if ok, err := r.Consistent(ctx); !ok || err != nil {
		t.Fatalf("Consistent after the list = %v, %v; want true (the undecodable value is skipped on both sides)", ok, err)
	}

	key := e.pods.Resource.Key("a", "p")
	r.LoseForTest(key)
	if ok, err := r.Consistent(ctx); ok || err != nil {
		t.Fatalf("Consistent after losing %s = %v, %v; want false", key, ok, err)
	}
	// The checker's own loop relists: run it often now and wait for the
	// relist (the sink's second restart), then find the object back.
	relisted := &restartSink{restarts: make(chan int64, 4)}
	r2 := e.start(relisted, func(r *reflector.Reflector) { r.SetConsistencyInterval(10 * time.Millisecond) })
	<-relisted.restarts // the first list
	waitFor(t, r2, rev)
	r2.LoseForTest(key)
	select {
	case <-relisted.restarts:
	case <-time.After(10 * time.Second):
		t.Fatal("no relist after the consistency checker ran")
	}
	// The sink hears of the restart before the relisted store is swapped
	// in, at a revision the old store has reached already: wait for a
	// write made after it, which only the relisted reflector can follow.
	waitFor(t, r2, e.put(pod("a", "r", "web", "Running"), false))
	snap, err := r2.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Get(key); !ok {
		t.Fatalf("%s not back after the relist", key)
	}
	if ok, err := r2.Consistent(ctx); !ok || err != nil {
		t.Fatalf("Consistent after the relist = %v, %v", ok, err)
	}
}

// restartSink tells each restart (list) of the range.
type restartSink struct {
	sink
	restarts chan int64
}

func (s *restartSink) Restart(id string, from int64) {
	s.sink.Restart(id, from)
	s.restarts <- from
}
