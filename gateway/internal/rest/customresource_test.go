package rest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/gateway/crconverttest"
	"github.com/kgate/kgate/gateway/internal/crconvert"
	"github.com/kgate/kgate/gateway/internal/customresource"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage/crds"
	"github.com/kgate/kgate/storage/ranges"
)

var gadgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}

// gadgetCRD: example.com/v1 Gadgets with status and scale subresources
// (spec.replicas, status.replicas, status.selector); spec.color defaults
// to blue.
func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	sel := ".status.selector"
	props := &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"replicas": {Type: "integer"},
				"color":    {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}},
			}},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"replicas": {Type: "integer"}, "selector": {Type: "string"},
			}},
		},
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: props},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: &sel},
				},
			}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames: names, StoredVersions: []string{"v1"},
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}},
		},
	}
}

// newCREnv is newEnv serving crd's resources through the custom
// resource semantics.
func newCREnv(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *env {
	t.Helper()
	return newEnv(t, func(cfg *Config) {
		if err := cfg.Registry.Add(crds.Resources(crd)...); err != nil {
			t.Fatal(err)
		}
		conv, err := crconvert.New(crconvert.Config{Logger: cfg.Logger})
		if err != nil {
			t.Fatal(err)
		}
		sem, err := customresource.New(cfg.Registry, semantics(t), conv)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Semantics = sem
		// The table the fake cache answers from covers the
		// gadgets' range too (it accepts ranges it does not know).
		table, err := ranges.Default(cfg.Registry)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Ranges = table
	})
}

// gadget is a stored Gadget as an older schema left it: no spec.color.
func gadget(name string, replicas int64, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": name, "namespace": "ns", "generation": int64(1)},
		"spec":     map[string]any{"replicas": replicas},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// TestCustomResourceScale: GET, PUT and PATCH of a custom resource's
// scale subresource read and write the CRD's replicas paths, as
// upstream's ScaleREST.
func TestCustomResourceScale(t *testing.T) {
	e := newCREnv(t, gadgetCRD())
	e.seed(gadgets, gadget("g", 2, map[string]any{"replicas": int64(1), "selector": "app=g"}))
	const path = "/apis/example.com/v1/namespaces/ns/gadgets/g/scale"
	var s autoscalingv1.Scale
	e.do("GET", path, nil).decode(t, &s)
	if s.Kind != "Scale" || s.APIVersion != "autoscaling/v1" || s.Name != "g" || s.Spec.Replicas != 2 || s.Status.Replicas != 1 || s.Status.Selector != "app=g" {
		t.Fatalf("scale %+v", s)
	}
	s.Spec.Replicas = 5
	if r := e.do("PUT", path, mustJSON(t, &s)); r.code != 200 {
		t.Fatalf("PUT scale: %d %s", r.code, r.body)
	}
	stored := e.stored(gadgets, "ns", "g").(*unstructured.Unstructured)
	if n, _, _ := unstructured.NestedInt64(stored.Object, "spec", "replicas"); n != 5 {
		t.Errorf("stored spec.replicas %d after PUT, want 5", n)
	}
	if stored.GetGeneration() != 2 {
		t.Errorf("generation %d after a replicas change, want 2", stored.GetGeneration())
	}
	var got autoscalingv1.Scale
	r := e.do("PATCH", path, []byte(`{"spec":{"replicas":7}}`), "Content-Type", "application/merge-patch+json")
	r.decode(t, &got)
	if got.Spec.Replicas != 7 || got.Status.Selector != "app=g" {
		t.Errorf("patched scale %+v", got)
	}
	// A stale resourceVersion conflicts.
	if r := e.do("PUT", path, mustJSON(t, &s)); r.code != 409 {
		t.Errorf("stale PUT: %d, want 409", r.code)
	}
	// Negative replicas: the custom resource's validation, upstream's message.
	got.Spec.Replicas = -1
	r = e.do("PUT", path, mustJSON(t, &got))
	if r.code != 422 || !strings.Contains(r.status.Message, "should be a non-negative integer") {
		t.Errorf("negative replicas: %d %+v", r.code, r.status)
	}
	// Without spec replicas: GET is an internal error, as upstream's.
	e.seed(gadgets, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "empty", "namespace": "ns"},
	}})
	r = e.do("GET", "/apis/example.com/v1/namespaces/ns/gadgets/empty/scale", nil)
	if r.code != 500 || !strings.Contains(r.status.Message, `the spec replicas field ".spec.replicas" does not exist`) {
		t.Errorf("scale without replicas: %d %+v", r.code, r.status)
	}
}

// TestCustomResourceReadDefaults: objects stored before a default was
// added are served with it on get, list and watch, as upstream's storage
// decoder defaults them; the stored bytes keep none.
func TestCustomResourceReadDefaults(t *testing.T) {
	e := newCREnv(t, gadgetCRD())
	e.seed(gadgets, gadget("a", 1, nil), gadget("b", 1, nil))
	color := func(t *testing.T, body []byte) string {
		t.Helper()
		var u unstructured.Unstructured
		if err := json.Unmarshal(body, &u.Object); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		c, _, _ := unstructured.NestedString(u.Object, "spec", "color")
		return c
	}
	if r := e.do("GET", "/apis/example.com/v1/namespaces/ns/gadgets/a", nil); r.code != 200 || color(t, r.body) != "blue" {
		t.Errorf("get: %d %s", r.code, r.body)
	}
	r := e.do("GET", "/apis/example.com/v1/namespaces/ns/gadgets", nil)
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %v %s", err, r.body)
	}
	for _, it := range list.Items {
		if c := color(t, it); c != "blue" {
			t.Errorf("list item color %q: %s", c, it)
		}
	}
	if _, ok, _ := unstructured.NestedString(e.stored(gadgets, "ns", "a").(*unstructured.Unstructured).Object, "spec", "color"); ok {
		t.Error("reading stored the default")
	}
	// A watch: the initial events (from the cache) and a delivered one,
	// whose frame is memoized for every watcher.
	w := e.watch(e.server(), "/apis/example.com/v1/namespaces/ns/gadgets?watch=1")
	s := <-e.hub.started
	for _, name := range []string{"a", "b"} {
		var f frame
		if err := w.dec.Decode(&f); err != nil {
			t.Fatal(err)
		}
		if f.Type != "ADDED" || color(t, f.Object) != "blue" {
			t.Errorf("initial event of %s: %s %s", name, f.Type, f.Object)
		}
	}
	c := gadget("c", 3, nil)
	c.SetResourceVersion("200")
	b, err := e.w.codec.EncodeJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	s.in <- watchhub.Delivery{Type: watchhub.Added, Rev: 200, Event: &watchhub.Shared{Event: event.Event{
		Revision: 200, Key: e.resource(gadgets).Key("ns", "c"), Namespace: "ns", Name: "c", Object: b,
	}}}
	var f frame
	if err := w.dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	if f.Type != "ADDED" || color(t, f.Object) != "blue" {
		t.Errorf("delivered event: %s %s", f.Type, f.Object)
	}
}

// newTwoVersionEnv serves gadgets stored as v1 and served as v1 and v2
// too, converted by a webhook (v1's spec.size is v2's spec.replicas), each
// version selectable on its own field.
func newTwoVersionEnv(t *testing.T) (*env, *crconverttest.Server) {
	t.Helper()
	hook := crconverttest.New(crconverttest.RenameField("v1", "size", "replicas"))
	t.Cleanup(hook.Close)
	crd := gadgetCRD()
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Storage: true, SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.size"}}},
		{Name: "v2", Served: true, SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.replicas"}}},
	}
	crd.Spec.Conversion = hook.Conversion("v1")
	return newCREnv(t, crd), hook
}

// TestCustomResourceListConversion: a list of a version other than the
// stored one converts each etcd page in one ConversionReview, as
// upstream converts a list, and selects on the converted objects: v2's
// selectable field spec.replicas is v1's spec.size in storage.
func TestCustomResourceListConversion(t *testing.T) {
	e, hook := newTwoVersionEnv(t)
	for i, name := range []string{"a", "b", "c"} {
		g := gadget(name, 0, nil)
		g.Object["spec"] = map[string]any{"size": int64(i + 1)}
		e.seed(gadgets, g)
	}

	var list unstructured.UnstructuredList
	r := e.do("GET", "/apis/example.com/v2/namespaces/ns/gadgets?fieldSelector=spec.replicas%3D2", nil)
	if r.code != 200 {
		t.Fatalf("list v2 by spec.replicas: %d %s", r.code, r.body)
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "b" || list.Items[0].GetAPIVersion() != "example.com/v2" {
		t.Fatalf("v2 gadgets with spec.replicas=2: %v, want b alone, in v2", list.Items)
	}
	if reviews, objects := hook.Counts(); reviews != 1 || objects != 3 {
		t.Errorf("%d conversion reviews of %d objects, want the page of 3 in one", reviews, objects)
	}

	// Unselected: every item, converted in one review again.
	r = e.do("GET", "/apis/example.com/v2/namespaces/ns/gadgets", nil)
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Items) != 3 {
		t.Fatalf("list v2: %d %s", r.code, r.body)
	}
	for i, it := range list.Items {
		if n, _, _ := unstructured.NestedInt64(it.Object, "spec", "replicas"); n != int64(i+1) {
			t.Errorf("%s: spec.replicas %d, want %d", it.GetName(), n, i+1)
		}
	}
	if reviews, objects := hook.Counts(); reviews != 2 || objects != 6 {
		t.Errorf("%d conversion reviews of %d objects after two lists, want 2 of 6", reviews, objects)
	}
}

// TestCustomResourceWatchSelectsServed: a watch of v2 selecting on v2's
// selectable field spec.replicas (v1's spec.size in storage) asks the hub
// for the namespace alone and selects each event once converted, with
// the hub's classification (into the selection: ADDED, out of it:
// DELETED with the previous state); each event is converted once for
// all watchers of the version.
func TestCustomResourceWatchSelectsServed(t *testing.T) {
	e, hook := newTwoVersionEnv(t)
	ln := e.server()
	const uri = "/apis/example.com/v2/namespaces/ns/gadgets?watch=1&resourceVersion=5&fieldSelector=spec.replicas%3D2"
	var watchers []*watchClient
	var streams []*fakeStream
	for range 2 {
		watchers = append(watchers, e.watch(ln, uri))
		s := <-e.hub.started
		if s.filter.Namespace != "ns" || (s.filter.Fields != nil && !s.filter.Fields.Empty()) || (s.filter.Labels != nil && !s.filter.Labels.Empty()) {
			t.Errorf("hub filter %+v, want namespace ns alone", s.filter)
		}
		streams = append(streams, s)
	}
	stored := func(name string, size, rev int64) []byte {
		g := gadget(name, 0, nil)
		g.Object["spec"] = map[string]any{"size": size}
		g.SetResourceVersion(fmt.Sprint(rev))
		b, err := e.w.codec.EncodeJSON(g)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send := func(typ watchhub.Type, name string, size, prevSize, rev int64) {
		ev := event.Event{Revision: rev, Key: e.resource(gadgets).Key("ns", name), Namespace: "ns", Name: name, Object: stored(name, size, rev)}
		if prevSize > 0 {
			ev.PrevObject = stored(name, prevSize, rev-1)
		}
		shared := &watchhub.Shared{Event: ev}
		for _, s := range streams {
			s.in <- watchhub.Delivery{Type: typ, Rev: rev, Event: shared}
		}
	}
	send(watchhub.Added, "a", 1, 0, 6)    // not selected
	send(watchhub.Added, "b", 2, 0, 7)    // ADDED b
	send(watchhub.Modified, "b", 3, 2, 8) // out: DELETED b as it was, at 8
	send(watchhub.Modified, "a", 2, 1, 9) // in: ADDED a
	send(watchhub.Modified, "a", 2, 2, 10)
	send(watchhub.Deleted, "a", 2, 2, 11)
	want := []string{"ADDED b 2 7", "DELETED b 2 8", "ADDED a 2 9", "MODIFIED a 2 10", "DELETED a 2 11"}
	for i, w := range watchers {
		for _, wf := range want {
			var f frame
			if err := w.dec.Decode(&f); err != nil {
				t.Fatal(err)
			}
			var u unstructured.Unstructured
			if err := u.UnmarshalJSON(f.Object); err != nil {
				t.Fatal(err)
			}
			n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			got := fmt.Sprintf("%s %s %d %s", f.Type, u.GetName(), n, u.GetResourceVersion())
			if got != wf || u.GetAPIVersion() != "example.com/v2" {
				t.Errorf("watcher %d: frame %q (%s), want %q in v2", i, got, u.GetAPIVersion(), wf)
			}
		}
	}
	// 6 objects and the 3 previous states of the updates, converted
	// once each.
	if reviews, objects := hook.Counts(); reviews != 9 || objects != 9 {
		t.Errorf("%d conversion reviews of %d objects for two watchers, want 9 of 9", reviews, objects)
	}

	// A list of the storage version with the same kind of selector reads
	// etcd and selects converted objects too.
	e.seed(gadgets, func() *unstructured.Unstructured {
		g := gadget("c", 0, nil)
		g.Object["spec"] = map[string]any{"size": int64(4)}
		return g
	}())
	before := len(e.cache.lists)
	r := e.do("GET", "/apis/example.com/v1/namespaces/ns/gadgets?fieldSelector=spec.size%3D4", nil)
	var list unstructured.UnstructuredList
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "c" {
		t.Fatalf("list v1 by spec.size: %d %s", r.code, r.body)
	}
	if len(e.cache.lists) != before {
		t.Errorf("a list selecting on a selectable field of a multi-version resource read the cache")
	}

	// The initial events of such a watch: the cache lists the namespace
	// unselected, the gateway selects the converted page.
	e.seed(gadgets, func() *unstructured.Unstructured {
		g := gadget("d", 0, nil)
		g.Object["spec"] = map[string]any{"size": int64(5)}
		return g
	}())
	w := e.watch(ln, "/apis/example.com/v2/namespaces/ns/gadgets?watch=1&fieldSelector=spec.replicas%3D4")
	s := <-e.hub.started
	if last := e.cache.lists[len(e.cache.lists)-1]; last.opts.Field != "" || last.opts.Label != "" {
		t.Errorf("initial events read with selectors %q %q", last.opts.Label, last.opts.Field)
	}
	streams = []*fakeStream{s}
	send(watchhub.Added, "e", 4, 0, 300)
	for _, wantName := range []string{"c", "e"} {
		var f frame
		if err := w.dec.Decode(&f); err != nil {
			t.Fatal(err)
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(f.Object); err != nil {
			t.Fatal(err)
		}
		if f.Type != "ADDED" || u.GetName() != wantName {
			t.Errorf("frame %s %s, want ADDED %s", f.Type, u.GetName(), wantName)
		}
	}
}
