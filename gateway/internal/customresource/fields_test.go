package customresource

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/fieldmanager"
	"github.com/kgate/kgate/storage/registry"
)

// noFields stands for the built-in field managers.
type noFields struct{}

func (noFields) Update(*registry.Resource, string, runtime.Object, runtime.Object, string) (runtime.Object, error) {
	return nil, errBuiltin
}
func (noFields) Apply(*registry.Resource, string, runtime.Object, []byte, string, bool) (runtime.Object, error) {
	return nil, errBuiltin
}

func managers(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, e := range u.GetManagedFields() {
		out[e.Manager] = string(e.Operation)
	}
	return out
}

// spec returns spec.<field> printed.
func spec(u *unstructured.Unstructured, field string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", field)
	return fmt.Sprint(v)
}

func TestFieldManagers(t *testing.T) {
	s, res := newSemantics(t)
	f, err := NewFieldManagers(s, noFields{})
	if err != nil {
		t.Fatal(err)
	}
	apply := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":3}}`
	obj, err := f.Apply(res, "", nil, []byte(apply), "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	u := obj.(*unstructured.Unstructured)
	if size, ok, _ := unstructured.NestedInt64(u.Object, "spec", "size"); !ok || size != 3 || managers(u)["alice"] != "Apply" {
		t.Fatalf("applied %v, managers %v", u.Object, managers(u))
	}
	// Another manager changing alice's field conflicts (409) unless forced.
	bob := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":5}}`
	if _, err := f.Apply(res, "", u, []byte(bob), "bob", false); !apierrors.IsConflict(err) {
		t.Errorf("conflicting apply: %v, want 409", err)
	}
	forced, err := f.Apply(res, "", u, []byte(bob), "bob", true)
	if err != nil {
		t.Fatal(err)
	}
	if size := spec(forced.(*unstructured.Unstructured), "size"); size != "5" {
		t.Errorf("forced apply: size %s, want 5", size)
	}
	// An update records its manager.
	next := u.DeepCopy()
	if err := unstructured.SetNestedField(next.Object, "red", "spec", "color"); err != nil {
		t.Fatal(err)
	}
	updated, err := f.Update(res, "", u, next, "kubectl-edit")
	if err != nil {
		t.Fatal(err)
	}
	if m := managers(updated.(*unstructured.Unstructured)); m["kubectl-edit"] != "Update" || m["alice"] != "Apply" {
		t.Errorf("managers after an update %v", m)
	}
	// The type converter is the CRD schema's, as upstream's: a field
	// the schema does not declare is refused (fieldValidation's answer
	// for apply), one under x-kubernetes-preserve-unknown-fields is not.
	unknown := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":3,"bogus":1}}`
	if _, err := f.Apply(res, "", nil, []byte(unknown), "alice", false); err == nil || !strings.Contains(err.Error(), ".spec.bogus: field not declared in schema") {
		t.Errorf("apply of an undeclared field: %v, want .spec.bogus: field not declared in schema", err)
	}
	preserved := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":3,"labels":{"any":"thing"}}}`
	if _, err := f.Apply(res, "", nil, []byte(preserved), "alice", false); err != nil {
		t.Errorf("apply under x-kubernetes-preserve-unknown-fields: %v", err)
	}
	if _, err := f.Apply(res, "", nil, []byte("- not an object"), "alice", false); !errors.Is(err, fieldmanager.ErrDecode) {
		t.Errorf("a patch that is not an object: %v, want ErrDecode", err)
	}
	// The status subresource's manager shares the CRD's type converter.
	if _, err := f.Update(res, "status", u, u.DeepCopy(), "controller"); err != nil {
		t.Fatal(err)
	}
	if len(f.managers) != 2 || len(f.converters) != 1 {
		t.Errorf("%d field managers over %d type converters, want 2 over 1", len(f.managers), len(f.converters))
	}
}

// TestFieldManagersScale: the scale subresource writes autoscaling/v1
// Scales, whose fields the built-in field managers manage.
func TestFieldManagersScale(t *testing.T) {
	s, res := newSemantics(t)
	f, err := NewFieldManagers(s, noFields{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Update(res, "scale", nil, nil, "alice"); !errors.Is(err, errBuiltin) {
		t.Errorf("scale update: %v, want the built-in field managers", err)
	}
	if _, err := f.Apply(res, "scale", nil, nil, "alice", false); !errors.Is(err, errBuiltin) {
		t.Errorf("scale apply: %v, want the built-in field managers", err)
	}
}
