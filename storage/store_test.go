package storage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

// t0 is the time of the test clock at start.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// env is a Store on an embedded etcd, with a clock tests can move.
type env struct {
	t        testing.TB
	store    *storage.Store
	client   *clientv3.Client
	registry *registry.Registry
	codec    *codec.Codec
	clock    atomic.Int64 // unix nanoseconds
}

type envOption func(*storage.Config)

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	storagetest.CheckGoroutines(t)
	e := &env{t: t, client: storagetest.StartEtcd(t)}
	e.clock.Store(t0.UnixNano())
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatalf("NewBuiltin: %v", err)
	}
	e.registry = reg
	e.codec = codec.New(reg.Scheme())
	cfg := storage.Config{
		Client:   e.client,
		Registry: reg,
		Codec:    e.codec,
		Logger:   slog.New(slog.DiscardHandler),
		Now:      func() time.Time { return time.Unix(0, e.clock.Load()).UTC() },
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.store, err = storage.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func (e *env) now() time.Time { return time.Unix(0, e.clock.Load()).UTC() }

func (e *env) advance(d time.Duration) { e.clock.Add(int64(d)) }

func (e *env) res(group, resource string) *registry.Resource {
	e.t.Helper()
	r, ok := e.registry.Lookup(schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource})
	if !ok {
		e.t.Fatalf("no resource %s.%s", resource, group)
	}
	return r
}

func (e *env) configMaps() *registry.Resource  { return e.res("", "configmaps") }
func (e *env) pods() *registry.Resource        { return e.res("", "pods") }
func (e *env) deployments() *registry.Resource { return e.res("apps", "deployments") }
func (e *env) nodes() *registry.Resource       { return e.res("", "nodes") }

// revision returns etcd's current revision.
func (e *env) revision() int64 {
	e.t.Helper()
	resp, err := e.client.Get(context.Background(), "/", clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatalf("cannot read revision: %v", err)
	}
	return resp.Header.Revision
}

// raw returns the stored value at key, or nil.
func (e *env) raw(key string) []byte {
	e.t.Helper()
	resp, err := e.client.Get(context.Background(), key)
	if err != nil {
		e.t.Fatalf("Get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	return resp.Kvs[0].Value
}

func (e *env) create(res *registry.Resource, obj runtime.Object) runtime.Object {
	e.t.Helper()
	out, err := e.store.Create(context.Background(), res, obj)
	if err != nil {
		e.t.Fatalf("Create: %v", err)
	}
	return out
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func rv(t testing.TB, obj runtime.Object) int64 {
	t.Helper()
	m, ok := obj.(metav1.Object)
	if !ok {
		t.Fatalf("%T has no metadata", obj)
	}
	n, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("bad resourceVersion %q: %v", m.GetResourceVersion(), err)
	}
	return n
}

func diff(want, got any) string { return cmp.Diff(want, got) }

func TestNewValidates(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	ok := storage.Config{Client: &clientv3.Client{}, Registry: reg, Codec: codec.New(reg.Scheme()), Logger: slog.New(slog.DiscardHandler)}
	f := func(name string, mutate func(*storage.Config), wantErr bool) {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			mutate(&cfg)
			_, err := storage.New(cfg)
			if (err != nil) != wantErr {
				t.Fatalf("New: got error %v, want error %v", err, wantErr)
			}
		})
	}
	f("valid", func(*storage.Config) {}, false)
	f("no client", func(c *storage.Config) { c.Client = nil }, true)
	f("no registry", func(c *storage.Config) { c.Registry = nil }, true)
	f("no codec", func(c *storage.Config) { c.Codec = nil }, true)
	f("no logger", func(c *storage.Config) { c.Logger = nil }, true)
	f("JSON", func(c *storage.Config) { c.MediaType = storage.MediaTypeJSON }, false)
	f("protobuf", func(c *storage.Config) { c.MediaType = storage.MediaTypeProtobuf }, false)
	f("YAML", func(c *storage.Config) { c.MediaType = "application/yaml" }, true)
	f("negative max request", func(c *storage.Config) { c.MaxRequestBytes = -1 }, true)
	f("negative event TTL", func(c *storage.Config) { c.EventTTL = -time.Second }, true)
}

func TestCreateGet(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()

	in := configMap("default", "c1", map[string]string{"k": "v"})
	out := e.create(cms, in)
	cm := out.(*corev1.ConfigMap)
	if cm.UID == "" || len(cm.UID) != 36 {
		t.Errorf("uid %q is not a UUID", cm.UID)
	}
	if !cm.CreationTimestamp.Time.Equal(t0) {
		t.Errorf("creationTimestamp %v, want %v", cm.CreationTimestamp, t0)
	}
	if cm.Generation != 0 {
		t.Errorf("generation of a ConfigMap = %d, want 0", cm.Generation)
	}
	if got, want := rv(t, cm), e.revision(); got != want {
		t.Errorf("resourceVersion %d, want the current revision %d", got, want)
	}

	got, err := e.store.Get(ctx, cms, "default", "c1", 0)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if d := diff(out, got); d != "" {
		t.Errorf("Get differs from Create (-create +get):\n%s", d)
	}
	if got.GetObjectKind().GroupVersionKind().Kind != "ConfigMap" {
		t.Errorf("Get returned kind %v", got.GetObjectKind().GroupVersionKind())
	}

	// The value is protobuf, as kube-apiserver stores it, and holds no
	// resourceVersion.
	raw := e.raw(cms.Key("default", "c1"))
	var stored corev1.ConfigMap
	if !codec.IsProtobuf(raw) {
		t.Errorf("stored value is not protobuf: %q", raw)
	} else if err := e.codec.Decode(raw, &stored); err != nil || stored.ResourceVersion != "" || stored.Name != "c1" {
		t.Errorf("stored value decodes to %+v, %v; want c1 without resourceVersion", stored.ObjectMeta, err)
	}

	// Nanoseconds of the clock are dropped, as the stored form does.
	e.advance(1500 * time.Millisecond)
	c2 := e.create(cms, configMap("default", "c2", nil)).(*corev1.ConfigMap)
	if want := t0.Add(time.Second); !c2.CreationTimestamp.Time.Equal(want) {
		t.Errorf("creationTimestamp %v, want %v", c2.CreationTimestamp, want)
	}

	// The generation is the caller's (upstream's strategy sets it in
	// the gateway): storage keeps what it is given.
	for _, g := range []int64{0, 1, 7} {
		d := e.create(e.deployments(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("d%d", g), Generation: g}})
		if got := d.(*appsv1.Deployment).Generation; got != g {
			t.Errorf("generation of a Deployment created with %d = %d", g, got)
		}
	}

	// Cluster-scoped objects lose a namespace.
	n := e.create(e.nodes(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "n1"}})
	if ns := n.(*corev1.Node).Namespace; ns != "" {
		t.Errorf("node namespace %q", ns)
	}
	if _, err := e.store.Get(ctx, e.nodes(), "ignored", "n1", 0); err != nil {
		t.Errorf("Get node: %v", err)
	}

	// Errors.
	check := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	_, err = e.store.Create(ctx, cms, configMap("default", "c1", nil))
	check("create existing", err, storage.ErrAlreadyExists)
	if err != nil && !strings.Contains(err.Error(), "configmaps default/c1") {
		t.Errorf("error %q does not name the object", err)
	}
	withRV := configMap("default", "c9", nil)
	withRV.ResourceVersion = "5"
	_, err = e.store.Create(ctx, cms, withRV)
	check("create with resourceVersion", err, storage.ErrInvalidObject)
	_, err = e.store.Create(ctx, cms, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}})
	check("create of another kind", err, storage.ErrInvalidObject)
	_, err = e.store.Create(ctx, cms, configMap("default", "", nil))
	check("create without name", err, storage.ErrInvalidObject)
	_, err = e.store.Create(ctx, cms, configMap("", "c9", nil))
	check("create without namespace", err, storage.ErrInvalidObject)
	_, err = e.store.Create(ctx, cms, configMap("default", "a/b", nil))
	check("create with a slash", err, storage.ErrInvalidObject)
	_, err = e.store.Get(ctx, cms, "default", "missing", 0)
	check("get missing", err, storage.ErrNotFound)
	_, err = e.store.Get(ctx, cms, "default", "c1", e.revision()+100)
	check("get future revision", err, storage.ErrRevisionTooLarge)
}

func TestGetAtRevision(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	v1 := e.create(cms, configMap("default", "c", map[string]string{"v": "1"}))
	_, err := e.store.Update(ctx, cms, "default", "c", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*corev1.ConfigMap).Data["v"] = "2"
		return cur, nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	old, err := e.store.Get(ctx, cms, "default", "c", rv(t, v1))
	if err != nil {
		t.Fatalf("Get at revision: %v", err)
	}
	if d := diff(v1, old); d != "" {
		t.Errorf("Get at the create revision differs (-want +got):\n%s", d)
	}
	if _, err := e.client.Compact(ctx, e.revision()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if _, err := e.store.Get(ctx, cms, "default", "c", rv(t, v1)); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("Get at compacted revision: got %v, want ErrCompacted", err)
	}
}

// TestCreateNeedsName: generating a name from metadata.generateName is
// the gateway's (upstream's strategy, then a new name when taken); the
// store refuses an object without a name and writes nothing.
func TestCreateNeedsName(t *testing.T) {
	e := newEnv(t)
	cms := e.configMaps()
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "gen-"}}
	if _, err := e.store.Create(context.Background(), cms, obj); !errors.Is(err, storage.ErrInvalidObject) {
		t.Errorf("create without a name: got %v, want ErrInvalidObject", err)
	}
	list, err := e.store.List(context.Background(), cms, "default", storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("stored %d objects", len(list.Items))
	}
}

func TestTooLarge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	big := configMap("default", "big", map[string]string{"k": strings.Repeat("x", 1600*1024)})
	if _, err := e.store.Create(ctx, e.configMaps(), big); !errors.Is(err, storage.ErrTooLarge) || !errors.Is(err, storage.ErrInvalidObject) {
		t.Errorf("Create of 1.6 MiB: got %v, want ErrTooLarge, an ErrInvalidObject", err)
	}
	if e.raw(e.configMaps().Key("default", "big")) != nil {
		t.Error("the large object was stored")
	}
	// Just below the limit goes through.
	ok := configMap("default", "ok", map[string]string{"k": strings.Repeat("x", 1500*1024)})
	if _, err := e.store.Create(ctx, e.configMaps(), ok); err != nil {
		t.Errorf("Create of 1.46 MiB: %v", err)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5"} {
		e.create(cms, configMap("a", n, nil))
	}
	for _, n := range []string{"b1", "b2"} {
		e.create(cms, configMap("b", n, nil))
	}
	e.create(e.res("", "secrets"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"}})
	// A namespace whose name extends "a" must not be listed with it.
	e.create(cms, configMap("ab", "x", nil))

	names := func(items []runtime.Object) []string {
		var out []string
		for _, it := range items {
			m := it.(metav1.Object)
			out = append(out, m.GetNamespace()+"/"+m.GetName())
			if m.GetResourceVersion() == "" {
				t.Errorf("%s has no resourceVersion", m.GetName())
			}
		}
		return out
	}

	all, err := e.store.List(ctx, cms, "a", storage.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if d := diff([]string{"a/a1", "a/a2", "a/a3", "a/a4", "a/a5"}, names(all.Items)); d != "" {
		t.Errorf("List a (-want +got):\n%s", d)
	}
	if all.Revision != e.revision() || all.Last != "" || all.Remaining != 0 {
		t.Errorf("List a: revision %d (current %d), last %q, remaining %d", all.Revision, e.revision(), all.Last, all.Remaining)
	}

	everywhere, err := e.store.List(ctx, cms, "", storage.ListOptions{})
	if err != nil {
		t.Fatalf("List all: %v", err)
	}
	if len(everywhere.Items) != 8 {
		t.Errorf("List all namespaces: %v", names(everywhere.Items))
	}

	// Pages stay at the first page's revision while objects change.
	p1, err := e.store.List(ctx, cms, "a", storage.ListOptions{Limit: 2})
	if err != nil {
		t.Fatalf("List page 1: %v", err)
	}
	if d := diff([]string{"a/a1", "a/a2"}, names(p1.Items)); d != "" || p1.Last != cms.Key("a", "a2") || p1.Remaining != 3 {
		t.Errorf("page 1: %v, last %q, remaining %d", names(p1.Items), p1.Last, p1.Remaining)
	}
	if _, _, err := e.store.Delete(ctx, cms, "a", "a3", storage.Preconditions{}, remove); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.create(cms, configMap("a", "a6", nil))
	var got []string
	next := storage.ListOptions{Limit: 2, Revision: p1.Revision, After: p1.Last}
	for {
		p, err := e.store.List(ctx, cms, "a", next)
		if err != nil {
			t.Fatalf("List page: %v", err)
		}
		if p.Revision != p1.Revision {
			t.Errorf("page at revision %d, want %d", p.Revision, p1.Revision)
		}
		got = append(got, names(p.Items)...)
		if p.Last == "" {
			break
		}
		next.After = p.Last
	}
	if d := diff([]string{"a/a3", "a/a4", "a/a5"}, got); d != "" {
		t.Errorf("later pages (-want +got):\n%s", d)
	}

	// After outside the prefix: before it lists everything, after it
	// nothing.
	before, err := e.store.List(ctx, cms, "b", storage.ListOptions{After: cms.Key("a", "zzz")})
	if err != nil || len(before.Items) != 2 {
		t.Errorf("List b after a key of a: %v, %v", err, before)
	}
	after, err := e.store.List(ctx, cms, "a", storage.ListOptions{After: cms.Key("b", "b1")})
	if err != nil || len(after.Items) != 0 || after.Revision == 0 {
		t.Errorf("List a after a key of b: %v, %+v", err, after)
	}

	if _, err := e.client.Compact(ctx, e.revision()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if _, err := e.store.List(ctx, cms, "a", storage.ListOptions{Revision: p1.Revision}); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("List at compacted revision: got %v, want ErrCompacted", err)
	}
}

// TestReadKubeAPIServerProtobuf reads a Pod stored the way kube-apiserver
// stores it, protobuf with the "k8s\x00" magic, with a store that writes
// JSON (--storage-media-type application/json).
func TestReadKubeAPIServerProtobuf(t *testing.T) {
	e := newEnv(t, func(c *storage.Config) { c.MediaType = storage.MediaTypeJSON })
	ctx := context.Background()
	pods := e.pods()
	grace := int64(10)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "p", UID: "0b8b8a3e-6f3c-4a57-9a5e-2b2c2d2e2f30",
			Labels: map[string]string{"app": "x"}, Generation: 1,
			CreationTimestamp: metav1.NewTime(t0),
		},
		Spec: corev1.PodSpec{
			NodeName: "n1", TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	value, err := e.codec.EncodeProtobuf(pod)
	if err != nil {
		t.Fatalf("EncodeProtobuf: %v", err)
	}
	put, err := e.client.Put(ctx, pods.Key("default", "p"), string(value))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	want := pod.DeepCopy()
	want.APIVersion, want.Kind = "v1", "Pod"
	want.ResourceVersion = strconv.FormatInt(put.Header.Revision, 10)

	got, err := e.store.Get(ctx, pods, "default", "p", 0)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if d := diff(want, got); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	list, err := e.store.List(ctx, pods, "default", storage.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("List: %d items", len(list.Items))
	}
	if d := diff(want, list.Items[0]); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}

	// An update changing nothing writes nothing, even though kgate would
	// store JSON.
	before := e.revision()
	same, err := e.store.Update(ctx, pods, "default", "p", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
	if err != nil {
		t.Fatalf("no-op Update: %v", err)
	}
	if rv(t, same) != put.Header.Revision || e.revision() != before {
		t.Errorf("no-op update of a protobuf value wrote: rv %d, revision %d → %d", rv(t, same), before, e.revision())
	}
	// A real update rewrites it as JSON.
	if _, err := e.store.Update(ctx, pods, "default", "p", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*corev1.Pod).Labels["app"] = "y"
		return cur, nil
	}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if raw := e.raw(pods.Key("default", "p")); codec.IsProtobuf(raw) {
		t.Error("updated value is still protobuf")
	}
}

// TestReadJSONWrittenBefore: a JSON value (an older kgate's, or written
// with --storage-media-type application/json) is read by a store that
// writes protobuf; an update changing nothing writes nothing, a real
// update rewrites it as protobuf.
func TestReadJSONWrittenBefore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.res("", "configmaps")
	cm := configMap("default", "old", map[string]string{"k": "v"})
	cm.UID, cm.CreationTimestamp = "6f3c4a57-9a5e-2b2c-2d2e-0b8b8a3e2f30", metav1.NewTime(t0)
	value, err := e.codec.EncodeJSON(cm)
	if err != nil {
		t.Fatal(err)
	}
	put, err := e.client.Put(ctx, cms.Key("default", "old"), string(value))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Get(ctx, cms, "default", "old", 0)
	if err != nil || got.(*corev1.ConfigMap).Data["k"] != "v" {
		t.Fatalf("Get = %v, %v", got, err)
	}
	before := e.revision()
	same, err := e.store.Update(ctx, cms, "default", "old", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
	if err != nil {
		t.Fatalf("no-op Update: %v", err)
	}
	if rv(t, same) != put.Header.Revision || e.revision() != before {
		t.Errorf("no-op update of a JSON value wrote: rv %d, revision %d → %d", rv(t, same), before, e.revision())
	}
	if _, err := e.store.Update(ctx, cms, "default", "old", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*corev1.ConfigMap).Data["k"] = "w"
		return cur, nil
	}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if raw := e.raw(cms.Key("default", "old")); !codec.IsProtobuf(raw) {
		t.Errorf("updated value is not protobuf: %q", raw)
	}
}
