package builtin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// validCRD returns a CRD of widgets.example.com with one served and
// stored version and a structural schema.
func validCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
}

// upstreamCRDErrors calls upstream's CRD validation directly on crd,
// defaulted and converted to the internal version as apiextensions-apiserver
// does before its strategy runs.
func upstreamCRDErrors(t *testing.T, s *Semantics, crd *apiextensionsv1.CustomResourceDefinition) []string {
	t.Helper()
	v := crd.DeepCopy()
	s.scheme.Default(v)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := s.scheme.Convert(v, internal, nil); err != nil {
		t.Fatal(err)
	}
	return paths(crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal))
}

func TestCRDCreate(t *testing.T) {
	s := newSemantics(t)
	res := resource(t, "apiextensions.k8s.io", "customresourcedefinitions")
	f := func(name string, mutate func(*apiextensionsv1.CustomResourceDefinition), wantInvalid bool) {
		t.Run(name, func(t *testing.T) {
			crd := validCRD()
			mutate(crd)
			want := upstreamCRDErrors(t, s, crd)
			if wantInvalid != (len(want) > 0) {
				t.Fatalf("upstream validation: %v, want invalid %v (a bad case)", want, wantInvalid)
			}
			got, err := s.Create(context.Background(), res, "", crd)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, paths(got.Errors)); diff != "" {
				t.Errorf("field errors (-upstream +kgate):\n%s", diff)
			}
			if wantInvalid {
				return
			}
			out, ok := got.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				t.Fatalf("created %T", got.Object)
			}
			// PrepareForCreate: generation 1, status reset, the storage
			// version recorded.
			if out.Generation != 1 || len(out.Status.Conditions) != 0 || !cmp.Equal(out.Status.StoredVersions, []string{"v1"}) {
				t.Errorf("generation %d, status %+v; want 1, no conditions, storedVersions [v1]", out.Generation, out.Status)
			}
			// v1 defaulting: conversion strategy None.
			if out.Spec.Conversion == nil || out.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
				t.Errorf("conversion %+v, want the default strategy None", out.Spec.Conversion)
			}
		})
	}
	f("valid", func(*apiextensionsv1.CustomResourceDefinition) {}, false)
	f("status dropped", func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	}, false)
	f("bad group", func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Group = "example"
		c.Name = "widgets.example"
	}, true)
	f("name is not plural.group", func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "gadgets.example.com" }, true)
	f("no storage version", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Storage = false }, true)
	f("two storage versions", func(c *apiextensionsv1.CustomResourceDefinition) {
		v2 := c.Spec.Versions[0]
		v2.Name = "v2"
		c.Spec.Versions = append(c.Spec.Versions, v2)
	}, true)
	f("no schema", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Schema = nil }, true)
	f("schema not structural", func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{}
	}, true)
	f("bad kind", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Kind = "widget kind" }, true)
	f("bad scope", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = "Galaxy" }, true)
}

func TestCRDUpdate(t *testing.T) {
	s := newSemantics(t)
	res := resource(t, "apiextensions.k8s.io", "customresourcedefinitions")
	created, err := s.Create(context.Background(), res, "", validCRD())
	if err != nil || len(created.Errors) > 0 {
		t.Fatalf("create: %v %v", err, created.Errors)
	}
	old := created.Object.(*apiextensionsv1.CustomResourceDefinition)
	old.UID, old.ResourceVersion = "u1", "5"
	old.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted"}}

	// The main resource keeps the stored status; a spec change bumps
	// the generation.
	next := old.DeepCopy()
	next.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	next.Spec.Names.ShortNames = []string{"wd"}
	got, err := s.Update(context.Background(), res, "", next, old)
	if err != nil || len(got.Errors) > 0 {
		t.Fatalf("update: %v %v", err, got.Errors)
	}
	out := got.Object.(*apiextensionsv1.CustomResourceDefinition)
	if out.Generation != 2 || len(out.Status.Conditions) != 1 {
		t.Errorf("generation %d, conditions %v; want 2 and the stored condition", out.Generation, out.Status.Conditions)
	}

	// The scope is immutable once stored versions exist.
	next = old.DeepCopy()
	next.Spec.Scope = apiextensionsv1.ClusterScoped
	got, err = s.Update(context.Background(), res, "", next, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Errors) == 0 {
		t.Error("scope change accepted")
	}

	// The status subresource keeps the stored spec and validates status.
	next = old.DeepCopy()
	next.Spec.Group = "changed.example.com"
	next.Status.AcceptedNames = apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ListKind: "WidgetList", Singular: "widget"}
	got, err = s.Update(context.Background(), res, "status", next, old)
	if err != nil || len(got.Errors) > 0 {
		t.Fatalf("status update: %v %v", err, got.Errors)
	}
	out = got.Object.(*apiextensionsv1.CustomResourceDefinition)
	if out.Spec.Group != "example.com" || out.Status.AcceptedNames.Plural != "widgets" {
		t.Errorf("status update: group %q accepted %+v", out.Spec.Group, out.Status.AcceptedNames)
	}
	next = old.DeepCopy()
	next.Status.AcceptedNames = apiextensionsv1.CustomResourceDefinitionNames{Plural: "Bad_Plural", Kind: "Widget", ListKind: "WidgetList"}
	got, err = s.Update(context.Background(), res, "status", next, old)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"FieldValueInvalid status.acceptedNames.plural"}; !cmp.Equal(paths(got.Errors), want) {
		t.Errorf("status update with a bad accepted plural: %v, want %v", paths(got.Errors), want)
	}

	// Reset fields for the field manager: status for the main resource,
	// spec for status.
	for sub, want := range map[string]string{"": "status", "status": "spec"} {
		rf, err := s.ResetFields(res, sub)
		if err != nil || rf["apiextensions.k8s.io/v1"] == nil {
			t.Errorf("ResetFields(%q) = %v, %v; want %s reset", sub, rf, err, want)
		}
	}
}
