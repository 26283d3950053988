package crds

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

// widgets is a CRD of example.com/widgets, versions v1 (storage) and
// v1beta1, established unless told otherwise.
func widgets(established bool) *apiextensionsv1.CustomResourceDefinition {
	status := apiextensionsv1.ConditionFalse
	if established {
		status = apiextensionsv1.ConditionTrue
	}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "u1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", ShortNames: []string{"wd"}, Categories: []string{"all"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta1", Served: true, Schema: anySchema()},
				{Name: "v1", Served: true, Storage: true, Schema: anySchema(),
					Subresources:     &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.color"}}},
				{Name: "v0", Served: false, Schema: anySchema()},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", ShortNames: []string{"wd"}, Categories: []string{"all"}},
			Conditions:    []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: status}},
		},
	}
}

func anySchema() *apiextensionsv1.CustomResourceValidation {
	t := true
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &t}}
}

func TestResources(t *testing.T) {
	got := Resources(widgets(true))
	if len(got) != 2 {
		t.Fatalf("got %d resources, want the 2 served versions", len(got))
	}
	v1, beta := got[0], got[1]
	if v1.Version != "v1" || beta.Version != "v1beta1" {
		t.Fatalf("versions %s, %s: want the storage version v1 first", v1.Version, beta.Version)
	}
	for _, r := range got {
		if r.Group != "example.com" || r.Resource != "widgets" || r.Kind != "Widget" || r.Singular != "widget" || !r.Namespaced ||
			r.Prefix != "/registry/example.com/widgets" || !r.Unstructured() || !slices.Equal(r.ShortNames, []string{"wd"}) || !slices.Equal(r.Categories, []string{"all"}) {
			t.Errorf("resource %+v", r)
		}
	}
	if v1.StorageKind.Kind != "" || beta.StorageGVK() != (schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}) {
		t.Errorf("storage kinds %v, %v: want v1's own, v1beta1 stored as v1", v1.StorageGVK(), beta.StorageGVK())
	}
	if !slices.Equal(v1.Subresources, []string{"status"}) || len(beta.Subresources) != 0 {
		t.Errorf("subresources %v, %v", v1.Subresources, beta.Subresources)
	}
	if !v1.SupportsField("spec.color") || beta.SupportsField("spec.color") {
		t.Errorf("selectable fields %v, %v", v1.FieldSelectors, beta.FieldSelectors)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"color": "red", "size": int64(3)}}}
	if f := v1.Fields(u); f["spec.color"] != "red" {
		t.Errorf("fields of a red widget %v", f)
	}
	if f := v1.Fields(&unstructured.Unstructured{Object: map[string]any{}}); f["spec.color"] != "" || !f.Has("spec.color") {
		t.Errorf("fields of a widget without color %v, want spec.color empty", f)
	}
	if got := Resources(widgets(false)); len(got) != 0 {
		t.Errorf("a CRD not established serves %d resources", len(got))
	}
}

func put(t *testing.T, cli *clientv3.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	b, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(t.Context(), Prefix+crd.Name, string(b)); err != nil {
		t.Fatal(err)
	}
}

func TestFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	storagetest.CheckGoroutines(t)
	cli := storagetest.StartEtcd(t)
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	put(t, cli, widgets(true))
	if _, err := cli.Put(t.Context(), Prefix+"broken.example.com", "not a CRD"); err != nil {
		t.Fatal(err)
	}
	f, err := Start(Config{Etcd: cli, Registry: reg, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	beta := v1
	beta.Version = "v1beta1"
	// Listed before Start returned.
	first, ok := reg.Lookup(v1)
	if !ok {
		t.Fatal("the established CRD is not served after Start")
	}
	if _, ok := reg.Lookup(beta); !ok {
		t.Fatal("v1beta1 not served")
	}
	obj, err := reg.New(first)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := obj.(*unstructured.Unstructured); !ok || u.GetAPIVersion() != "example.com/v1" || u.GetKind() != "Widget" {
		t.Fatalf("New = %#v, want an unstructured example.com/v1 Widget", obj)
	}

	// A status change that leaves spec and names alone changes nothing.
	gen := reg.Generation()
	crd := widgets(true)
	crd.Status.Conditions = append(crd.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue})
	put(t, cli, crd)
	// A second CRD, put after it, shows the first event was applied.
	gadgets := widgets(true)
	gadgets.Name, gadgets.Spec.Names.Plural, gadgets.Status.AcceptedNames.Plural = "gadgets.example.com", "gadgets", "gadgets"
	gadgets.Status.AcceptedNames.Kind, gadgets.Status.AcceptedNames.ShortNames = "Gadget", nil
	put(t, cli, gadgets)
	gadgetsV1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	storagetest.Eventually(t, 10*time.Second, "gadgets served", storagetest.Holds(func() bool { _, ok := reg.Lookup(gadgetsV1); return ok }))
	if got, _ := reg.Lookup(v1); got != first || reg.Generation() != gen+1 {
		t.Errorf("a status-only change replaced the resources (generation %d, want %d)", reg.Generation(), gen+1)
	}

	// A version no longer served goes, the other stays.
	crd.Spec.Versions[0].Served = false
	put(t, cli, crd)
	storagetest.Eventually(t, 10*time.Second, "v1beta1 gone", storagetest.Holds(func() bool { _, ok := reg.Lookup(beta); return !ok }))
	if _, ok := reg.Lookup(v1); !ok {
		t.Fatal("v1 gone with v1beta1")
	}

	// Not established: nothing served.
	put(t, cli, widgets(false))
	storagetest.Eventually(t, 10*time.Second, "v1 gone", storagetest.Holds(func() bool { _, ok := reg.Lookup(v1); return !ok }))

	// Deleted: gone.
	if _, err := cli.Delete(t.Context(), Prefix+gadgets.Name); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 10*time.Second, "gadgets gone", storagetest.Holds(func() bool { _, ok := reg.Lookup(gadgetsV1); return !ok }))
}

func TestFollowerConflict(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	cli := storagetest.StartEtcd(t)
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	// A CRD claiming apps/v1 deployments is refused; the built-in stays.
	crd := widgets(true)
	crd.Name, crd.Spec.Group = "deployments.apps", "apps"
	crd.Status.AcceptedNames.Plural = "deployments"
	put(t, cli, crd)
	f, err := Start(Config{Etcd: cli, Registry: reg, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, ok := reg.Lookup(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"})
	if !ok || res.Unstructured() {
		t.Fatalf("apps/v1 deployments: %+v, %v; want the built-in", res, ok)
	}
}

func TestStartValidates(t *testing.T) {
	if _, err := Start(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Start(empty) = %v, want ErrConfig", err)
	}
}
