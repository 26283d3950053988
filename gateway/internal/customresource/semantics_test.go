package customresource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/crds"
	"github.com/kgate/kgate/storage/registry"
)

// widgetCRD: example.com/v1 Widgets with a status subresource; spec.size
// an integer ≥ 1, capped at 10 by a CEL rule, that may not shrink
// (transition rule); spec.color defaulting to blue; spec.labels
// preserving unknown fields; status.ready a boolean.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	one := 1.0
	t := true
	props := &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"size":   {Type: "integer", Minimum: &one, XValidations: apiextensionsv1.ValidationRules{{Rule: "self >= oldSelf", Message: "size may not shrink"}}},
					"color":  {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}},
					"labels": {Type: "object", XPreserveUnknownFields: &t},
					"port":   {XIntOrString: true},
				},
				XValidations: apiextensionsv1.ValidationRules{{Rule: "!has(self.size) || self.size <= 10", Message: "size must be at most 10"}},
			},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"ready": {Type: "boolean"}}},
		},
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"}
	return &apiextensionsv1.CustomResourceDefinition{
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: props},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames: names,
			Conditions:    []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}},
		},
	}
}

// noBuiltin stands for the built-in semantics: custom resources must not
// reach it.
type noBuiltin struct{}

var errBuiltin = errors.New("built-in semantics called")

func (noBuiltin) Scheme() *runtime.Scheme    { return runtime.NewScheme() }
func (noBuiltin) Default(obj runtime.Object) {}
func (noBuiltin) Create(context.Context, *registry.Resource, string, runtime.Object) (builtin.Result, error) {
	return builtin.Result{}, errBuiltin
}
func (noBuiltin) Update(context.Context, *registry.Resource, string, runtime.Object, runtime.Object) (builtin.Result, error) {
	return builtin.Result{}, errBuiltin
}
func (noBuiltin) Delete(context.Context, *registry.Resource, runtime.Object, *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error) {
	return nil, 0, errBuiltin
}
func (noBuiltin) ReturnsDeletedObject(*registry.Resource) bool { return false }

func newSemantics(t *testing.T) (*Semantics, *registry.Resource) {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(crds.Resources(widgetCRD())...); err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Lookup(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	if !ok {
		t.Fatal("widgets not registered")
	}
	s, err := New(reg, noBuiltin{}, converter(t))
	if err != nil {
		t.Fatal(err)
	}
	return s, res
}

func widget(spec map[string]any, extra map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns"},
		"spec":     spec,
	}}
	for k, v := range extra {
		u.Object[k] = v
	}
	return u
}

// causes renders field errors as "field: message" lines.
func causes(r builtin.Result) string {
	var out []string
	for _, e := range r.Errors {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

func TestCreate(t *testing.T) {
	s, res := newSemantics(t)
	f := func(name string, obj *unstructured.Unstructured, wantErrs []string, check func(*unstructured.Unstructured) string) {
		t.Run(name, func(t *testing.T) {
			s.Default(obj) // as decoded from the request
			r, err := s.Create(t.Context(), res, "", obj)
			if err != nil {
				t.Fatal(err)
			}
			got := causes(r)
			for _, w := range wantErrs {
				if !strings.Contains(got, w) {
					t.Errorf("errors\n%s\nwant one containing %q", got, w)
				}
			}
			if len(wantErrs) == 0 && len(r.Errors) > 0 {
				t.Fatalf("unexpected errors\n%s", got)
			}
			if check != nil && len(r.Errors) == 0 {
				if msg := check(r.Object.(*unstructured.Unstructured)); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
	f("valid, defaulted, pruned, status dropped",
		widget(map[string]any{"size": int64(3), "extra": "x", "labels": map[string]any{"kept": "yes"}, "port": "http"}, map[string]any{"status": map[string]any{"ready": true}, "top": 1}),
		nil, func(u *unstructured.Unstructured) string {
			if c, _, _ := unstructured.NestedString(u.Object, "spec", "color"); c != "blue" {
				return "spec.color not defaulted"
			}
			if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "extra"); ok {
				return "spec.extra not pruned"
			}
			if _, ok := u.Object["top"]; ok {
				return "top not pruned"
			}
			if v, _, _ := unstructured.NestedString(u.Object, "spec", "labels", "kept"); v != "yes" {
				return "x-kubernetes-preserve-unknown-fields pruned"
			}
			if _, ok := u.Object["status"]; ok {
				return "status kept on create"
			}
			if u.GetGeneration() != 1 {
				return "generation not 1"
			}
			return ""
		})
	f("schema violation", widget(map[string]any{"size": int64(0)}, nil),
		[]string{"spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"}, nil)
	f("wrong type", widget(map[string]any{"size": "big"}, nil),
		[]string{`spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`}, nil)
	f("CEL rule", widget(map[string]any{"size": int64(11)}, nil),
		[]string{"spec: Invalid value: size must be at most 10"}, nil)
	f("bad name", func() *unstructured.Unstructured {
		u := widget(map[string]any{"size": int64(1)}, nil)
		u.SetName("Not_A_Name")
		return u
	}(), []string{"metadata.name: Invalid value: \"Not_A_Name\""}, nil)
	f("generateName", func() *unstructured.Unstructured {
		u := widget(map[string]any{"size": int64(1)}, nil)
		u.SetName("")
		u.SetGenerateName("w-")
		return u
	}(), nil, func(u *unstructured.Unstructured) string {
		if !strings.HasPrefix(u.GetName(), "w-") || len(u.GetName()) != len("w-")+5 {
			return "name " + u.GetName() + " not generated from w-"
		}
		return ""
	})
}

// TestSchemaMessagesAreUpstreams checks the schema messages against
// upstream's validator called directly.
func TestSchemaMessagesAreUpstreams(t *testing.T) {
	s, res := newSemantics(t)
	obj := widget(map[string]any{"size": int64(0)}, nil)
	r, err := s.Create(t.Context(), res, "", obj.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(widgetCRD().Spec.Versions[0].Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	v, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	want := apiservervalidation.ValidateCustomResource(nil, obj.Object, v)
	if len(want) == 0 || causes(r) != causes(builtin.Result{Errors: want}) {
		t.Errorf("errors\n%s\nupstream's\n%s", causes(r), causes(builtin.Result{Errors: want}))
	}
}

func TestUpdate(t *testing.T) {
	s, res := newSemantics(t)
	stored := func(spec map[string]any, ready bool) *unstructured.Unstructured {
		u := widget(spec, map[string]any{"status": map[string]any{"ready": ready}})
		u.SetGeneration(4)
		u.SetUID("uid")
		u.SetResourceVersion("7")
		return u
	}
	f := func(name, sub string, obj, old *unstructured.Unstructured, wantErrs []string, check func(*unstructured.Unstructured) string) {
		t.Run(name, func(t *testing.T) {
			s.Default(obj)
			r, err := s.Update(t.Context(), res, sub, obj, old)
			if err != nil {
				t.Fatal(err)
			}
			got := causes(r)
			for _, w := range wantErrs {
				if !strings.Contains(got, w) {
					t.Errorf("errors\n%s\nwant one containing %q", got, w)
				}
			}
			if len(wantErrs) == 0 && len(r.Errors) > 0 {
				t.Fatalf("unexpected errors\n%s", got)
			}
			if check != nil && len(r.Errors) == 0 {
				if msg := check(r.Object.(*unstructured.Unstructured)); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
	gen := func(want int64) func(*unstructured.Unstructured) string {
		return func(u *unstructured.Unstructured) string {
			if u.GetGeneration() != want {
				return fmt.Sprintf("generation %d, want %d", u.GetGeneration(), want)
			}
			return ""
		}
	}
	old := stored(map[string]any{"size": int64(3), "color": "red"}, false)
	withRV := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetResourceVersion("7")
		u.SetUID("uid")
		return u
	}
	f("spec change bumps generation, status kept", "",
		withRV(widget(map[string]any{"size": int64(4), "color": "red"}, map[string]any{"status": map[string]any{"ready": true}})), old, nil,
		func(u *unstructured.Unstructured) string {
			if r, _, _ := unstructured.NestedBool(u.Object, "status", "ready"); r {
				return "the main resource changed status"
			}
			return gen(5)(u)
		})
	f("metadata only keeps generation", "", func() *unstructured.Unstructured {
		u := withRV(widget(map[string]any{"size": int64(3), "color": "red"}, map[string]any{"status": map[string]any{"ready": false}}))
		u.SetLabels(map[string]string{"a": "b"})
		return u
	}(), old, nil, gen(4))
	f("transition rule", "", withRV(widget(map[string]any{"size": int64(2)}, nil)), old,
		[]string{"spec.size: Invalid value: 2: size may not shrink"}, nil)
	f("status subresource changes status only", "status",
		withRV(widget(map[string]any{"size": int64(9)}, map[string]any{"status": map[string]any{"ready": true}})), old, nil,
		func(u *unstructured.Unstructured) string {
			if r, _, _ := unstructured.NestedBool(u.Object, "status", "ready"); !r {
				return "status not set"
			}
			if sz, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); sz != 3 {
				return "the status subresource changed spec"
			}
			return gen(4)(u)
		})
	f("status schema", "status",
		withRV(widget(map[string]any{"size": int64(3)}, map[string]any{"status": map[string]any{"ready": "yes"}})), old,
		[]string{`status.ready: Invalid value: "string": ready in body must be of type boolean: "string"`}, nil)
	// Ratcheting: an invalid value stored before the rule was tightened
	// may stay while other fields change.
	invalid := stored(map[string]any{"size": int64(0), "color": "red"}, false)
	f("ratcheting keeps an unchanged invalid field", "",
		withRV(widget(map[string]any{"size": int64(0), "color": "green"}, nil)), invalid, nil, nil)
	f("a changed field is validated", "",
		withRV(widget(map[string]any{"size": int64(-1), "color": "green"}, nil)), invalid,
		[]string{"spec.size in body should be greater than or equal to 1"}, nil)
	if _, err := s.Update(t.Context(), res, "scale", old.DeepCopy(), old); !errors.Is(err, ErrSubresource) {
		t.Errorf("scale: %v, want ErrSubresource", err)
	}
}

func TestBuiltinPassThrough(t *testing.T) {
	s, _ := newSemantics(t)
	cm, _ := s.reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if _, err := s.Create(t.Context(), cm, "", nil); !errors.Is(err, errBuiltin) {
		t.Errorf("a configmap create: %v, want the built-in semantics", err)
	}
	if _, err := s.Update(t.Context(), cm, "", nil, nil); !errors.Is(err, errBuiltin) {
		t.Errorf("a configmap update: %v, want the built-in semantics", err)
	}
}

func TestUnknownFields(t *testing.T) {
	s, _ := newSemantics(t)
	obj := widget(map[string]any{"size": int64(1), "extra": "x", "labels": map[string]any{"free": "form"}}, map[string]any{"top": true})
	got := s.UnknownFields(obj)
	if strings.Join(got, ",") != "spec.extra,top" {
		t.Errorf("unknown fields %q, want spec.extra and top", got)
	}
	if _, ok := obj.Object["top"]; !ok {
		t.Error("UnknownFields modified the object")
	}
	if got := s.UnknownFields(widget(map[string]any{"size": int64(1)}, nil)); len(got) != 0 {
		t.Errorf("unknown fields of a valid widget: %q", got)
	}
}
