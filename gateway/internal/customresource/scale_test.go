package customresource

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/crds"
	"github.com/kgate/kgate/storage/registry"
)

// scaledCRD is widgetCRD with a scale subresource on v1: spec.size the
// spec replicas, status.count the status replicas, status.selector the
// label selector; and v2 without one.
func scaledCRD() *apiextensionsv1.CustomResourceDefinition {
	crd := widgetCRD()
	v := &crd.Spec.Versions[0]
	v.Schema.OpenAPIV3Schema.Properties["status"] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"ready": {Type: "boolean"}, "count": {Type: "integer"}, "selector": {Type: "string"},
	}}
	sel := ".status.selector"
	v.Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.count", LabelSelectorPath: &sel}
	v2 := *v.DeepCopy()
	v2.Name, v2.Storage, v2.Subresources = "v2", false, nil
	crd.Spec.Versions = append(crd.Spec.Versions, v2)
	return crd
}

func TestScaleOf(t *testing.T) {
	crd := scaledCRD()
	paths, err := ScaleOf(crd, "v1")
	if err != nil || paths == nil {
		t.Fatalf("v1 scale: %v, %v", paths, err)
	}
	if none, err := ScaleOf(crd, "v2"); err != nil || none != nil {
		t.Errorf("v2 scale: %v, %v; want none", none, err)
	}
	for _, tc := range []struct {
		name                 string
		spec, status         map[string]any
		replicas, statusRepl int32
		selector             string
		found                bool
		err                  string
	}{
		{name: "all set", spec: map[string]any{"size": int64(3)}, status: map[string]any{"count": int64(2), "selector": "a=b"}, replicas: 3, statusRepl: 2, selector: "a=b", found: true},
		{name: "no status", spec: map[string]any{"size": int64(4)}, replicas: 4, found: true},
		{name: "no spec replicas", spec: map[string]any{}, status: map[string]any{"count": int64(1)}, statusRepl: 1},
		{name: "not an integer", spec: map[string]any{"size": "three"}, err: "cannot read the spec replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{}
			if tc.status != nil {
				extra["status"] = tc.status
			}
			u := widget(tc.spec, extra)
			u.SetResourceVersion("7")
			s, found, err := paths.Of(u)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if found != tc.found || s.Spec.Replicas != tc.replicas || s.Status.Replicas != tc.statusRepl || s.Status.Selector != tc.selector {
				t.Errorf("scale %+v found %v", s, found)
			}
			if s.Kind != "Scale" || s.APIVersion != "autoscaling/v1" || s.Name != "w" || s.Namespace != "ns" || s.ResourceVersion != "7" {
				t.Errorf("scale identity %+v", s)
			}
			next, err := paths.SetReplicas(u, 9)
			if err != nil {
				t.Fatal(err)
			}
			if n, _, _ := unstructured.NestedInt64(next.Object, "spec", "size"); n != 9 {
				t.Errorf("set replicas: spec.size %d", n)
			}
			if _, ok := u.Object["spec"].(map[string]any)["size"].(int64); tc.found && u.Object["spec"].(map[string]any)["size"] != int64(tc.replicas) || !tc.found && ok {
				t.Error("SetReplicas modified its input")
			}
		})
	}
}

func TestReplicasPaths(t *testing.T) {
	paths, err := ReplicasPaths(scaledCRD())
	if err != nil {
		t.Fatal(err)
	}
	if got := paths["example.com/v1"].String(); got != ".spec.size" {
		t.Errorf("v1 replicas path %q", got)
	}
	if p, ok := paths["example.com/v2"]; !ok || p != nil {
		t.Errorf("v2 replicas path %v (present %v), want nil", p, ok)
	}
}

// TestScaleUpdate: a scale update goes through the main strategy, whose
// validation checks the replicas as upstream's does.
func TestScaleUpdate(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(crds.Resources(scaledCRD())...); err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Lookup(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	if !ok || !res.HasSubresource("scale") {
		t.Fatalf("widgets served %v, scale %v", ok, ok && res.HasSubresource("scale"))
	}
	s, err := New(reg, noBuiltin{}, converter(t))
	if err != nil {
		t.Fatal(err)
	}
	old := widget(map[string]any{"size": int64(3)}, nil)
	old.SetResourceVersion("5")
	old.SetGeneration(1)
	next := widget(map[string]any{"size": int64(5)}, nil)
	next.SetResourceVersion("5")
	r, err := s.Update(t.Context(), res, "scale", next, old)
	if err != nil || len(r.Errors) > 0 {
		t.Fatalf("scale update: %v %v", err, r.Errors)
	}
	if g := r.Object.(*unstructured.Unstructured).GetGeneration(); g != 2 {
		t.Errorf("generation %d after a replicas change, want 2", g)
	}
	bad := widget(map[string]any{"size": int64(-1)}, nil)
	bad.SetResourceVersion("5")
	r, err = s.Update(t.Context(), res, "scale", bad, old)
	if err != nil {
		t.Fatal(err)
	}
	if got := causes(r); !strings.Contains(got, ".spec.size: Invalid value: -1: should be a non-negative integer") {
		t.Errorf("negative replicas: %q", got)
	}
}

func TestReadDefaults(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	noDefaults := scaledCRD()
	noDefaults.Name, noDefaults.Spec.Names.Plural, noDefaults.Status.AcceptedNames.Plural = "plain.example.com", "plains", "plains"
	noDefaults.Spec.Names.Kind, noDefaults.Status.AcceptedNames.Kind = "Plain", "Plain"
	for _, v := range noDefaults.Spec.Versions {
		delete(v.Schema.OpenAPIV3Schema.Properties["spec"].Properties, "color")
	}
	// Defaults in v2 only: objects stored in v2 get them when read.
	v2Defaults := scaledCRD()
	v2Defaults.Name, v2Defaults.Spec.Names.Plural, v2Defaults.Status.AcceptedNames.Plural = "later.example.com", "laters", "laters"
	v2Defaults.Spec.Names.Kind, v2Defaults.Status.AcceptedNames.Kind = "Later", "Later"
	delete(v2Defaults.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "color")
	resources := append(crds.Resources(scaledCRD()), crds.Resources(noDefaults)...)
	if err := reg.Add(append(resources, crds.Resources(v2Defaults)...)...); err != nil {
		t.Fatal(err)
	}
	s, err := New(reg, noBuiltin{}, converter(t))
	if err != nil {
		t.Fatal(err)
	}
	cm, _ := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	plains, _ := reg.Lookup(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "plains"})
	widgets, _ := reg.Lookup(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	if s.ReadDefaults(cm) != nil || s.ReadDefaults(plains) != nil {
		t.Error("read defaults for a built-in or a schema without defaults")
	}
	def := s.ReadDefaults(widgets)
	if def == nil {
		t.Fatal("no read defaults for a schema with a default")
	}
	u := widget(map[string]any{"size": int64(2)}, nil)
	def(u)
	if c, _, _ := unstructured.NestedString(u.Object, "spec", "color"); c != "blue" {
		t.Errorf("spec.color %q after the read defaults", c)
	}

	laters, _ := reg.Lookup(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "laters"})
	def = s.ReadDefaults(laters)
	if def == nil {
		t.Fatal("no read defaults for a CRD whose v2 has a default")
	}
	for _, tc := range []struct{ apiVersion, want string }{{"example.com/v1", ""}, {"example.com/v2", "blue"}} {
		u := widget(map[string]any{"size": int64(2)}, nil)
		u.SetAPIVersion(tc.apiVersion)
		u.SetKind("Later")
		def(u)
		if c, _, _ := unstructured.NestedString(u.Object, "spec", "color"); c != tc.want {
			t.Errorf("stored in %s: spec.color %q after the read defaults, want %q (that version's)", tc.apiVersion, c, tc.want)
		}
	}
}
