package crdcontroller

import (
	"strings"
	"testing"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crdNamed(group, plural, kind string, short ...string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List", ShortNames: short,
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true},
			},
		},
	}
}

// accepted returns crd with its spec names accepted.
func accepted(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	crd.Status.AcceptedNames = crd.Spec.Names
	return crd
}

func TestNamesAndConditions(t *testing.T) {
	type want struct {
		status          apiextensionsv1.ConditionStatus
		reason, message string
		plural, kind    string
		establishedWhy  string
	}
	f := func(name string, in *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition, w want) {
		t.Run(name, func(t *testing.T) {
			all := append([]*apiextensionsv1.CustomResourceDefinition{in}, others...)
			names, cond, est := namesAndConditions(in, all)
			if cond.Status != w.status || cond.Reason != w.reason || cond.Message != w.message {
				t.Errorf("NamesAccepted %s %s %q, want %s %s %q", cond.Status, cond.Reason, cond.Message, w.status, w.reason, w.message)
			}
			if names.Plural != w.plural || names.Kind != w.kind {
				t.Errorf("accepted plural %q kind %q, want %q %q", names.Plural, names.Kind, w.plural, w.kind)
			}
			if est.Reason != w.establishedWhy {
				t.Errorf("Established reason %q, want %q", est.Reason, w.establishedWhy)
			}
		})
	}
	noConflict := want{status: "True", reason: "NoConflicts", message: "no conflicts found", plural: "widgets", kind: "Widget", establishedWhy: "Installing"}
	f("alone", crdNamed("example.com", "widgets", "Widget"), nil, noConflict)
	f("other group", crdNamed("example.com", "widgets", "Widget"),
		[]*apiextensionsv1.CustomResourceDefinition{accepted(crdNamed("other.com", "widgets", "Widget"))}, noConflict)
	f("plural taken", crdNamed("example.com", "widgets", "Widget"),
		[]*apiextensionsv1.CustomResourceDefinition{accepted(crdNamed("example.com", "widgets", "Gadget"))},
		want{status: "False", reason: "PluralConflict", message: `"widgets" is already in use`, kind: "Widget", establishedWhy: "NotAccepted"})
	f("kind taken", crdNamed("example.com", "gizmos", "Widget"),
		[]*apiextensionsv1.CustomResourceDefinition{accepted(crdNamed("example.com", "widgets", "Widget"))},
		want{status: "False", reason: "ListKindConflict", message: `"WidgetList" is already in use`, plural: "gizmos", establishedWhy: "NotAccepted"})
	f("short name taken", crdNamed("example.com", "gizmos", "Gizmo", "wd"),
		[]*apiextensionsv1.CustomResourceDefinition{accepted(crdNamed("example.com", "widgets", "Widget", "wd"))},
		want{status: "False", reason: "ShortNamesConflict", message: `"wd" is already in use`, plural: "gizmos", kind: "Gizmo", establishedWhy: "NotAccepted"})
	f("short name is another's plural", crdNamed("example.com", "gizmos", "Gizmo", "widgets"),
		[]*apiextensionsv1.CustomResourceDefinition{accepted(crdNamed("example.com", "widgets", "Widget"))},
		want{status: "False", reason: "ShortNamesConflict", message: `"widgets" is already in use`, plural: "gizmos", kind: "Gizmo", establishedWhy: "NotAccepted"})
	// Names a CRD already has stay its own.
	mine := accepted(crdNamed("example.com", "widgets", "Widget"))
	mine.Spec.Names.ShortNames = []string{"wd"}
	f("own names", mine, nil, noConflict)
}

func TestNameEstablishStoredVersion(t *testing.T) {
	crd := crdNamed("example.com", "widgets", "Widget")
	if !name(crd, []*apiextensionsv1.CustomResourceDefinition{crd}) {
		t.Fatal("name changed nothing on a new CRD")
	}
	if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) ||
		!apiextensionshelpers.IsCRDConditionFalse(crd, apiextensionsv1.Established) {
		t.Fatalf("after naming: %+v", crd.Status.Conditions)
	}
	if name(crd, []*apiextensionsv1.CustomResourceDefinition{crd}) {
		t.Error("name changed a CRD whose names are accepted")
	}
	if !establish(crd) || !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		t.Fatalf("establish: %+v", crd.Status.Conditions)
	}
	if c := apiextensionshelpers.FindCRDCondition(crd, apiextensionsv1.Established); c.Reason != "InitialNamesAccepted" {
		t.Errorf("Established reason %q", c.Reason)
	}
	if establish(crd) {
		t.Error("establish changed an established CRD")
	}
	if !storedVersion(crd) || len(crd.Status.StoredVersions) != 1 || crd.Status.StoredVersions[0] != "v1" {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
	if storedVersion(crd) {
		t.Error("storedVersion added the storage version twice")
	}

	// A conversion webhook with a bad caBundle is not established.
	bad := crdNamed("example.com", "gadgets", "Gadget")
	bad.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: []byte("not PEM")}}}
	name(bad, nil)
	if !establish(bad) {
		t.Fatal("establish changed nothing")
	}
	if c := apiextensionshelpers.FindCRDCondition(bad, apiextensionsv1.Established); c.Status != "False" || c.Reason != "InvalidCABundle" {
		t.Errorf("Established %+v, want False InvalidCABundle", c)
	}
}
