package registry

import (
	"errors"
	"slices"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var gvrConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// builtinWithout returns the built-in resources minus gvr, and gvr's entry.
func builtinWithout(t *testing.T, gvr schema.GroupVersionResource) ([]Resource, Resource) {
	t.Helper()
	var rest []Resource
	var out Resource
	for _, r := range Builtin() {
		if r.GVR() == gvr {
			out = r
			continue
		}
		rest = append(rest, r)
	}
	if out.Kind == "" {
		t.Fatalf("%v is not built in", gvr)
	}
	return rest, out
}

func TestNewBuiltin(t *testing.T) {
	reg, err := NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	if reg.Generation() != 0 {
		t.Errorf("generation %d, want 0", reg.Generation())
	}
	if got, want := len(reg.Resources()), len(Builtin()); got != want {
		t.Errorf("%d resources, want %d", got, want)
	}
	if g := reg.Groups(); len(g) == 0 || g[0].Group != "" || g[0].Versions[0] != "v1" {
		t.Errorf("first group %+v, want the core group", g[0])
	}
	if res, ok := reg.Lookup(gvrConfigMaps); !ok || res.Kind != "ConfigMap" {
		t.Errorf("Lookup(configmaps) = %v, %v", res, ok)
	}
}

func TestValidate(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cm := Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true, Prefix: "/registry/configmaps"}
	with := func(f func(*Resource)) Resource {
		r := cm
		f(&r)
		return r
	}
	tests := []struct {
		name string
		add  []Resource
		want error
	}{
		{"ok", []Resource{cm}, nil},
		{"no resource", []Resource{with(func(r *Resource) { r.Resource = "" })}, ErrInvalid},
		{"no kind", []Resource{with(func(r *Resource) { r.Kind = "" })}, ErrInvalid},
		{"no version", []Resource{with(func(r *Resource) { r.Version = "" })}, ErrInvalid},
		{"no prefix", []Resource{with(func(r *Resource) { r.Prefix = "" })}, ErrInvalid},
		{"create-only needs no prefix", []Resource{{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews", Kind: "TokenReview", Verbs: []string{"create"}}}, nil},
		{"unknown kind", []Resource{with(func(r *Resource) { r.Kind = "Widget" })}, ErrInvalid},
		{"field selectors without Fields", []Resource{with(func(r *Resource) { r.FieldSelectors = []string{"data.x"} })}, ErrInvalid},
		{"field label for no field selector", []Resource{with(func(r *Resource) { r.FieldLabels = map[string]string{"x": "data.x"} })}, ErrInvalid},
		{"twice", []Resource{cm, cm}, ErrExists},
		{"prefix nested below another", []Resource{cm, {Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true, Prefix: "/registry/configmaps/x"}}, ErrInvalid},
		{"prefix nesting another", []Resource{cm, {Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true, Prefix: "/registry"}}, ErrInvalid},
		{"prefix shared", []Resource{cm, {Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true, Prefix: "/registry/configmaps"}}, nil},
		{"prefix sharing a start", []Resource{cm, {Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true, Prefix: "/registry/configmapsx"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(scheme, tt.add)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Errorf("New: %v, want %v", err, tt.want)
			}
			reg, err := New(scheme, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = reg.Add(tt.add...)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Errorf("Add: %v, want %v", err, tt.want)
			}
			if tt.want != nil && (len(reg.Resources()) != 0 || reg.Generation() != 0) {
				t.Errorf("a failed Add changed the registry: %d resources, generation %d", len(reg.Resources()), reg.Generation())
			}
		})
	}
}

func TestAddRemove(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	base, cm := builtinWithout(t, gvrConfigMaps)
	reg, err := New(scheme, base)
	if err != nil {
		t.Fatal(err)
	}
	before := reg.Snapshot()
	pods, _ := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	changed := reg.Changed()
	if _, ok := reg.Lookup(gvrConfigMaps); ok {
		t.Fatal("configmaps served before Add")
	}
	if err := reg.Add(cm); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Add did not close the Changed channel")
	}
	select {
	case <-reg.Changed():
		t.Fatal("the new Changed channel is closed already")
	default:
	}
	if reg.Generation() != 1 {
		t.Errorf("generation %d, want 1", reg.Generation())
	}
	got, ok := reg.Lookup(gvrConfigMaps)
	if !ok || got.Kind != "ConfigMap" {
		t.Fatalf("Lookup after Add = %v, %v", got, ok)
	}
	if last := reg.Resources()[len(reg.Resources())-1]; last != got {
		t.Errorf("added resource is not last: %v", last.GVR())
	}
	if !slices.ContainsFunc(reg.GroupVersionResources("", "v1"), func(r *Resource) bool { return r == got }) {
		t.Error("GroupVersionResources misses the added resource")
	}
	if p, _ := reg.Lookup(pods.GVR()); p != pods {
		t.Error("pods changed its *Resource across Add")
	}
	// The old snapshot is untouched.
	if _, ok := before.Lookup(gvrConfigMaps); ok || len(before.Resources()) != len(base) || before.Generation() != 0 {
		t.Error("Add changed an earlier snapshot")
	}
	select {
	case <-before.Changed():
	default:
		t.Error("the earlier snapshot's Changed is not closed")
	}

	if err := reg.Remove(gvrConfigMaps, schema.GroupVersionResource{Group: "x", Version: "v1", Resource: "y"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove of an unknown resource: %v, want ErrNotFound", err)
	}
	if _, ok := reg.Lookup(gvrConfigMaps); !ok || reg.Generation() != 1 {
		t.Error("a failed Remove changed the registry")
	}
	changed = reg.Changed()
	if err := reg.Remove(gvrConfigMaps); err != nil {
		t.Fatal(err)
	}
	<-changed
	if _, ok := reg.Lookup(gvrConfigMaps); ok {
		t.Error("configmaps served after Remove")
	}
	if len(reg.Resources()) != len(base) || reg.Generation() != 2 {
		t.Errorf("%d resources at generation %d after Remove", len(reg.Resources()), reg.Generation())
	}
	if p, _ := reg.Lookup(pods.GVR()); p != pods {
		t.Error("pods changed its *Resource across Remove")
	}
}

func TestGroups(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := New(scheme, []Resource{{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true, Prefix: "/registry/configmaps"}})
	if err != nil {
		t.Fatal(err)
	}
	hpa1 := Resource{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers", Kind: "HorizontalPodAutoscaler", Namespaced: true, Prefix: "/registry/horizontalpodautoscalers"}
	hpa2 := hpa1
	hpa2.Version = "v2"
	if err := reg.Add(hpa2, hpa1); err != nil {
		t.Fatal(err)
	}
	want := []GroupVersions{{Group: ""}, {Group: "autoscaling"}}
	want[0].Versions = []string{"v1"}
	want[1].Versions = []string{"v2", "v1"}
	if !slices.EqualFunc(reg.Groups(), want, func(a, b GroupVersions) bool { return a.Group == b.Group && slices.Equal(a.Versions, b.Versions) }) {
		t.Errorf("groups %+v, want %+v", reg.Groups(), want)
	}
	if err := reg.Remove(hpa2.GVR()); err != nil {
		t.Fatal(err)
	}
	if g := reg.Groups(); len(g) != 2 || !slices.Equal(g[1].Versions, []string{"v1"}) {
		t.Errorf("groups after removing v2: %+v", g)
	}
	if err := reg.Remove(hpa1.GVR()); err != nil {
		t.Fatal(err)
	}
	if g := reg.Groups(); len(g) != 1 {
		t.Errorf("groups after removing the group's last resource: %+v", g)
	}
}

func TestAddCopies(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := New(scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	cm := Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true, ShortNames: []string{"cm"}, Prefix: "/registry/configmaps"}
	if err := reg.Add(cm); err != nil {
		t.Fatal(err)
	}
	cm.ShortNames[0] = "changed"
	if got, _ := reg.Lookup(gvrConfigMaps); got.ShortNames[0] != "cm" {
		t.Errorf("the caller's slice reached the registry: %v", got.ShortNames)
	}
}

// TestConcurrent adds and removes while readers read; under -race it
// shows reads need no lock and every snapshot is whole.
func TestConcurrent(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	base, cm := builtinWithout(t, gvrConfigMaps)
	reg, err := New(scheme, base)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 200
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				s := reg.Snapshot()
				_, has := s.Lookup(gvrConfigMaps)
				n := len(s.Resources())
				if (has && n != len(base)+1) || (!has && n != len(base)) {
					t.Errorf("torn snapshot: configmaps %v with %d resources", has, n)
					return
				}
				if got := len(s.GroupVersionResources("", "v1")); got == 0 {
					t.Error("no core resources")
					return
				}
				_ = reg.Groups()
			}
		})
	}
	// A follower sees the last generation, however changes coalesce.
	wg.Go(func() {
		for {
			ch := reg.Changed()
			if reg.Generation() == 2*rounds {
				return
			}
			<-ch
		}
	})
	for range rounds {
		if err := reg.Add(cm); err != nil {
			t.Fatal(err)
		}
		if err := reg.Remove(gvrConfigMaps); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
}

func TestReplaceUnstructured(t *testing.T) {
	reg, err := NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	v1 := Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true, Prefix: "/registry/example.com/widgets", CRD: crd}
	if err := reg.Replace(nil, []Resource{v1}); err != nil {
		t.Fatalf("a kind unknown to the scheme, served unstructured: %v", err)
	}
	v2 := v1
	v2.Version = "v2"
	changed := reg.Changed()
	gen := reg.Generation()
	if err := reg.Replace([]schema.GroupVersionResource{v1.GVR()}, []Resource{v2}); err != nil {
		t.Fatal(err)
	}
	<-changed
	if _, ok := reg.Lookup(v1.GVR()); ok {
		t.Error("v1 still served")
	}
	res, ok := reg.Lookup(v2.GVR())
	if !ok || reg.Generation() != gen+1 {
		t.Fatalf("v2 served %v at generation %d, want one change", ok, reg.Generation())
	}
	for _, f := range []func(*Resource) (runtime.Object, error){reg.New, reg.NewStored} {
		obj, err := f(res)
		if err != nil {
			t.Fatal(err)
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GroupVersionKind() != v2.GVK() {
			t.Errorf("new object %#v, want an unstructured %v", obj, v2.GVK())
		}
	}
	// All or none.
	if err := reg.Replace([]schema.GroupVersionResource{v1.GVR()}, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing what is not served: %v, want ErrNotFound", err)
	}
	if err := reg.Replace([]schema.GroupVersionResource{v2.GVR()}, []Resource{v2, v2}); !errors.Is(err, ErrExists) {
		t.Errorf("adding twice: %v, want ErrExists", err)
	}
	if _, ok := reg.Lookup(v2.GVR()); !ok || reg.Generation() != gen+1 {
		t.Error("a failed Replace changed the registry")
	}
	// Typed kinds still must be known to the scheme.
	bad := v1
	bad.CRD = nil
	if err := reg.Replace(nil, []Resource{bad}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a typed kind unknown to the scheme: %v, want ErrInvalid", err)
	}
}
