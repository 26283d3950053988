package cachenode_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/storagetest"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(ns, name, app string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%3), Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func put(t *testing.T, e *cachenodetest.Env, p *corev1.Pod, proto bool) int64 {
	t.Helper()
	var (
		b   []byte
		err error
	)
	if proto {
		b, err = e.Codec.EncodeProtobuf(p)
	} else {
		b, err = e.Codec.EncodeJSON(p)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.Etcd.Put(context.Background(), "/registry/pods/"+p.Namespace+"/"+p.Name, string(b))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func TestEveryWriteOnNATSOnceInOrder(t *testing.T) {
	storagetest.CheckGoroutines(t)
	e := cachenodetest.Start(t)
	nc, err := nats.Connect(e.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 1000)
	sub, err := nc.ChanSubscribe(event.RangeSubjects("pods"), msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// creates, updates and deletes over three namespaces, some in one txn
	rnd := rand.New(rand.NewPCG(1, 2))
	type write struct {
		rev  int64
		typ  event.Type
		key  string
		ns   string
		txn2 bool
	}
	var writes []write
	live := map[string]bool{}
	ctx := context.Background()
	for i := range 120 {
		ns := fmt.Sprintf("ns%d", rnd.IntN(3))
		name := fmt.Sprintf("p%d", rnd.IntN(8))
		key := "/registry/pods/" + ns + "/" + name
		switch {
		case live[key] && rnd.IntN(3) == 0:
			resp, err := e.Etcd.Delete(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			delete(live, key)
			writes = append(writes, write{resp.Header.Revision, event.Deleted, key, ns, false})
		case i%17 == 0:
			// two pods in one transaction: one revision, two events
			other := fmt.Sprintf("/registry/pods/%s/txn%d", ns, i)
			a, _ := e.Codec.EncodeJSON(pod(ns, name, "web", i))
			b, _ := e.Codec.EncodeJSON(pod(ns, fmt.Sprintf("txn%d", i), "web", i))
			resp, err := e.Etcd.Txn(ctx).Then(clientv3OpPut(key, a), clientv3OpPut(other, b)).Commit()
			if err != nil {
				t.Fatal(err)
			}
			typ := event.Added
			if live[key] {
				typ = event.Modified
			}
			live[key], live[other] = true, true
			writes = append(writes, write{resp.Header.Revision, typ, key, ns, true}, write{resp.Header.Revision, event.Added, other, ns, true})
		default:
			typ := event.Added
			if live[key] {
				typ = event.Modified
			}
			rev := put(t, e, pod(ns, name, "web", i), i%5 == 0)
			live[key] = true
			writes = append(writes, write{rev, typ, key, ns, false})
		}
	}

	// Once the node has applied the last write it has handed every event
	// to NATS. Flushing its connection, then ours, puts every message the
	// server routed to us in msgs, in order (the client delivers to the
	// channel before it reads the PONG): what is not there now was not
	// published, and what is there is all there will be.
	last := writes[len(writes)-1].rev
	storagetest.Eventually(t, time.Minute, "the node has applied the last write", func() error {
		_, err := e.Client.List(ctx, "pods", client.ListOptions{Read: client.Read{ResourceVersion: last, Match: "NotOlderThan"}, Limit: 1})
		return err
	})
	if err := e.NATS.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []event.Event
	for len(msgs) > 0 {
		m := <-msgs
		var ev event.Event
		if err := ev.Unmarshal(m.Data); err != nil {
			t.Fatal(err)
		}
		if m.Subject != event.Subject("pods", ev.Namespace) {
			t.Fatalf("event of %s on subject %s", ev.Namespace, m.Subject)
		}
		got = append(got, ev)
	}
	if len(got) != len(writes) {
		first := len(got)
		for i := range min(len(got), len(writes)) {
			if got[i].Revision != writes[i].rev || got[i].Key != writes[i].key {
				first = i
				break
			}
		}
		t.Fatalf("received %d of %d events; the first missing or different is write %d of %d", len(got), len(writes), first, len(writes))
	}
	// The chains start at the node's list revision; events of one
	// transaction share a revision, are numbered by Index, and point at
	// the revision before the transaction.
	listRev := got[0].PrevRangeRevision
	if listRev <= 0 || listRev >= got[0].Revision {
		t.Fatalf("first event's chain starts at %d, want the list revision before %d", listRev, got[0].Revision)
	}
	prevRange := listRev
	prevSubject := map[string]int64{}
	index := uint32(0)
	for i, w := range writes {
		ev := got[i]
		if ev.Revision != w.rev || ev.Key != w.key || ev.Type != w.typ {
			t.Fatalf("event %d = %v %s@%d, want %v %s@%d", i, ev.Type, ev.Key, ev.Revision, w.typ, w.key, w.rev)
		}
		subj, ok := prevSubject[w.ns]
		if !ok {
			subj = listRev
		}
		if ev.PrevRangeRevision != prevRange || ev.PrevSubjectRevision != subj {
			t.Fatalf("event %d (%d) chain = range %d subject %d, want %d %d", i, ev.Revision, ev.PrevRangeRevision, ev.PrevSubjectRevision, prevRange, subj)
		}
		wantCount := uint32(1)
		if w.txn2 {
			wantCount = 2
		}
		if ev.Index != index || ev.Count != wantCount {
			t.Fatalf("event %d (%d) is %d of %d, want %d of %d", i, ev.Revision, ev.Index, ev.Count, index, wantCount)
		}
		index++
		if ev.Last() {
			prevRange, index = ev.Revision, 0
		}
		prevSubject[w.ns] = ev.Revision
		if !strings.Contains(string(ev.Object), fmt.Sprintf(`"resourceVersion":"%d"`, w.rev)) {
			t.Fatalf("event %d object without its revision: %.200s", i, ev.Object)
		}
	}

	// the window serves the same events to a late gateway
	first := writes[0].rev - 1
	evs, seen, err := e.Client.Events(ctx, "pods", first)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(got) || seen < writes[len(writes)-1].rev {
		t.Fatalf("Events = %d events seen %d", len(evs), seen)
	}
	for i := range evs {
		if evs[i].Revision != got[i].Revision || evs[i].Key != got[i].Key || evs[i].PrevSubjectRevision != got[i].PrevSubjectRevision {
			t.Fatalf("window event %d differs", i)
		}
	}
}

func TestProgressOnIdleRange(t *testing.T) {
	storagetest.CheckGoroutines(t)
	e := cachenodetest.Start(t)
	sub, err := e.NATS.SubscribeSync(event.ProgressSubject("configmaps"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	rev := put(t, e, pod("a", "p", "web", 0), false) // another range moves etcd on
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("no progress at %d on the idle range: %v", rev, err)
		}
		var ev event.Event
		if err := ev.Unmarshal(m.Data); err != nil {
			t.Fatal(err)
		}
		if ev.Type != event.Progress || ev.Range != "configmaps" {
			t.Fatalf("progress message %+v", ev)
		}
		if ev.Revision >= rev {
			break
		}
	}
}

func TestReadAPI(t *testing.T) {
	storagetest.CheckGoroutines(t)
	reg := prometheus.NewRegistry()
	e := cachenodetest.Start(t, func(c *cachenode.Config) { c.Metrics = reg })
	ctx := context.Background()
	var last int64
	for i := range 10 {
		app := "web"
		if i%3 == 0 {
			app = "db"
		}
		last = put(t, e, pod(fmt.Sprintf("ns%d", i%2), fmt.Sprintf("p%d", i), app, i), i%2 == 0)
	}
	// consistent read: wait for etcd's revision, reached on a write elsewhere
	resp, err := e.Etcd.Put(ctx, "/registry/configmaps/x/y", "{}")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err := e.Client.List(ctx, "pods", client.ListOptions{Read: client.Read{ResourceVersion: resp.Header.Revision, Match: "NotOlderThan"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 10 || l.Revision < resp.Header.Revision {
		t.Fatalf("List = %d items at %d", len(l.Items), l.Revision)
	}
	// The only node publishes every range: kube-apiserver's object count.
	if got := storageObjects(t, reg, "pods"); got != 10 {
		t.Errorf("apiserver_storage_objects{resource=pods} = %v, want 10", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("NotOlderThan on a quiet range took %v", d)
	}

	// pages with a selector at one revision
	var names []string
	o := client.ListOptions{Read: client.Read{ResourceVersion: last, Match: "Exact"}, Label: "app=web", Field: "spec.nodeName!=node-0", Limit: 2}
	for {
		l, err := e.Client.List(ctx, "pods", o)
		if err != nil {
			t.Fatal(err)
		}
		if l.Revision != last || l.Remaining != 0 {
			t.Fatalf("page at %d remaining %d", l.Revision, l.Remaining)
		}
		for _, it := range l.Items {
			var p corev1.Pod
			if err := jsonDecode(it, &p); err != nil {
				t.Fatal(err)
			}
			names = append(names, p.Namespace+"/"+p.Name)
		}
		if l.Continue == "" {
			break
		}
		o.Continue = l.Continue
	}
	// app=web: i not divisible by 3; nodeName != node-0: i%3 != 0 — the same set
	want := []string{"ns0/p2", "ns0/p4", "ns0/p8", "ns1/p1", "ns1/p5", "ns1/p7"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("pages = %v, want %v", names, want)
	}

	obj, err := e.Client.Get(ctx, "pods", "/registry/pods/ns0/p4", client.Read{}, client.Protobuf)
	if err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := p.Unmarshal(obj.Data); err != nil {
		t.Fatal(err)
	}
	if p.Name != "p4" || p.ResourceVersion != fmt.Sprint(obj.Revision) || p.Labels["app"] != "web" {
		t.Fatalf("protobuf pod %+v", p.ObjectMeta)
	}
	if _, err := e.Client.Get(ctx, "pods", "/registry/pods/ns0/nope", client.Read{}, client.JSON); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get missing = %v", err)
	}
	if _, _, err := e.Client.Events(ctx, "pods", 0); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Events before the list = %v", err)
	}
	if _, err := e.Client.List(ctx, "pods", client.ListOptions{Label: "a b c"}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("bad selector = %v", err)
	}
	if err := e.Client.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	// readiness of some ranges: those a range being added makes wait for
	if err := e.Client.Ready(ctx, "pods", "configmaps"); err != nil {
		t.Fatalf("Ready of pods and configmaps: %v", err)
	}
	if err := e.Client.Ready(ctx, "pods", "nope"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Ready of a range not served = %v, want unavailable", err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	for _, name := range []string{"kgate_cachenode_events_total", "kgate_cachenode_store_objects", "kgate_cachenode_store_bytes",
		"kgate_cachenode_window_events", "kgate_cachenode_seen_lag_revisions", "kgate_cachenode_requests_total",
		"kgate_cachenode_request_duration_seconds", "kgate_cachenode_ranges_ready", "kgate_cachenode_published_total"} {
		if !seen[name] {
			t.Errorf("metric %s missing", name)
		}
	}
}

func TestCloseBeforeRun(t *testing.T) {
	storagetest.CheckGoroutines(t)
	e := cachenodetest.Start(t)
	n, err := cachenode.New(cachenode.Config{Etcd: e.Etcd, NATS: e.NATS, Registry: e.Registry, Codec: e.Codec, Ranges: e.Ranges})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Run(context.Background()); err == nil {
		t.Fatal("Run after Close succeeded")
	}
	if _, err := cachenode.New(cachenode.Config{}); err == nil {
		t.Fatal("New with an empty config succeeded")
	}
}

// TestWindowBudget: the windows of all ranges of a node stay within the
// node's budget; the oldest events go, and a read from before them is
// answered "compacted" rather than with a gap.
func TestWindowBudget(t *testing.T) {
	storagetest.CheckGoroutines(t)
	const budget = 64 << 10
	reg := prometheus.NewRegistry()
	e := cachenodetest.Start(t, func(c *cachenode.Config) { c.Metrics = reg; c.Window.NodeMaxBytes = budget })
	ctx := context.Background()
	first := put(t, e, pod("ns", "p0", "web", 0), false)
	var last int64
	for i := range 200 {
		last = put(t, e, pod("ns", fmt.Sprintf("p%d", i), "web", i), false)
		if _, err := e.Etcd.Put(ctx, fmt.Sprintf("/registry/configmaps/ns/c%d", i), `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c`+fmt.Sprint(i)+`","namespace":"ns"}}`); err != nil {
			t.Fatal(err)
		}
	}
	// Read at the last revision: the node has applied every event.
	if _, err := e.Client.List(ctx, "pods", client.ListOptions{Read: client.Read{ResourceVersion: last, Match: "NotOlderThan"}}); err != nil {
		t.Fatal(err)
	}
	values := gather(t, reg)
	if b := values["kgate_cachenode_window_node_bytes"]; b <= 0 || b > budget {
		t.Fatalf("windows hold %v bytes, budget %d", b, budget)
	}
	if values["kgate_cachenode_window_budget_evictions_total"] == 0 {
		t.Fatal("no event was evicted for the budget")
	}
	_, _, err := e.Client.Events(ctx, "pods", first)
	if !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("events after %d: %v, want compacted", first, err)
	}
}

// storageObjects reads apiserver_storage_objects for resource from reg.
func storageObjects(t *testing.T, reg *prometheus.Registry, resource string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "apiserver_storage_objects" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == resource {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no apiserver_storage_objects{resource=%q}", resource)
	return 0
}

// TestWindowBudgetFollowsStores: with a share, the node's windows keep
// what only they hold (the versions updates superseded) up to that share
// of what its stores hold: the limit follows the stores, and the oldest
// events go past it.
func TestWindowBudgetFollowsStores(t *testing.T) {
	storagetest.CheckGoroutines(t)
	const share = 0.25
	reg := prometheus.NewRegistry()
	e := cachenodetest.Start(t, func(c *cachenode.Config) {
		c.Metrics = reg
		c.Window.NodeShare, c.Window.NodeMinBytes, c.Window.NodeMaxBytes = share, 1, 1<<30
	})
	ctx := context.Background()
	first := put(t, e, pod("ns", "p0", "web-0", 0), false)
	var last int64
	for round := range 4 {
		for i := range 100 {
			last = put(t, e, pod("ns", fmt.Sprintf("p%d", i), fmt.Sprintf("web-%d", round), i), false)
		}
	}
	if _, err := e.Client.List(ctx, "pods", client.ListOptions{Read: client.Read{ResourceVersion: last, Match: "NotOlderThan"}}); err != nil {
		t.Fatal(err)
	}
	var values map[string]float64
	// The store gauges are refreshed now and then; the budget's limit at once.
	storagetest.Eventually(t, 10*time.Second, "the window limit to be a quarter of the stores' bytes", func() error {
		values = gather(t, reg)
		store, limit := values["kgate_cachenode_store_bytes"], values["kgate_cachenode_window_node_limit_bytes"]
		if want := math.Floor(share * store); values["kgate_cachenode_store_objects"] < 100 || limit != want {
			return fmt.Errorf("limit %v, stores %v bytes (%v objects)", limit, store, values["kgate_cachenode_store_objects"])
		}
		return nil
	})
	limit := values["kgate_cachenode_window_node_limit_bytes"]
	if b := values["kgate_cachenode_window_node_bytes"]; b <= 0 || b > limit {
		t.Fatalf("windows hold %v bytes, limit %v", b, limit)
	}
	if values["kgate_cachenode_window_budget_evictions_total"] == 0 {
		t.Fatal("no event was evicted for the budget")
	}
	if _, _, err := e.Client.Events(ctx, "pods", first); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("events after %d: %v, want compacted", first, err)
	}
}

// gather sums each gauge and counter of reg over its labels.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				values[mf.GetName()] += m.Gauge.GetValue()
			case m.Counter != nil:
				values[mf.GetName()] += m.Counter.GetValue()
			}
		}
	}
	return values
}
