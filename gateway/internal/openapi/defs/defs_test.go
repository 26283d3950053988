package defs

import (
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/kgate/kgate/storage/registry"
)

func TestDefinitions(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	d := New(scheme)

	all, err := d.Schemas()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 500 {
		t.Errorf("Schemas: %d definitions", len(all))
	}
	pod := all["io.k8s.api.core.v1.Pod"]
	if pod == nil {
		t.Fatal("Schemas lacks io.k8s.api.core.v1.Pod")
	}
	if got := pod.Properties["spec"].AllOf; len(got) != 1 || got[0].Ref.String() != "#/components/schemas/io.k8s.api.core.v1.PodSpec" {
		t.Errorf("v3 Pod.spec = %+v, want allOf a components reference", pod.Properties["spec"])
	}

	// What the field manager will do with them.
	tc, err := managedfields.NewTypeConverter(all, false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}
	obj := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "x"}}}}
	if _, err := tc.ObjectToTyped(obj); err != nil {
		t.Errorf("ObjectToTyped(Pod): %v", err)
	}

	v2, err := d.V2("io.k8s.api.apps.v1.Deployment")
	if err != nil {
		t.Fatal(err)
	}
	spec := v2["io.k8s.api.apps.v1.Deployment"].Properties["spec"]
	if ref := spec.Ref.String(); ref != "#/definitions/io.k8s.api.apps.v1.DeploymentSpec" {
		t.Errorf("v2 Deployment.spec reference = %q", ref)
	}
	if _, ok := v2["io.k8s.api.core.v1.PodSpec"]; !ok {
		t.Error("V2 does not follow references to PodSpec")
	}
	if _, ok := v2["io.k8s.api.core.v1.Service"]; ok {
		t.Error("V2 holds a definition nothing refers to")
	}

	for _, tc := range []struct {
		gvk  schema.GroupVersionKind
		name string
		ok   bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "io.k8s.api.core.v1.Pod", true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DeploymentList"}, "io.k8s.api.apps.v1.DeploymentList", true},
		{schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, "io.k8s.api.autoscaling.v1.Scale", true},
		{schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"}, "", false},
	} {
		name, ok := d.Name(tc.gvk)
		if name != tc.name || ok != tc.ok {
			t.Errorf("Name(%v) = %q, %v; want %q, %v", tc.gvk, name, ok, tc.name, tc.ok)
		}
	}
	if _, err := d.V3("io.k8s.api.core.v1.NoSuchKind"); err == nil || !strings.Contains(err.Error(), "NoSuchKind") {
		t.Errorf("V3 of an unknown name: %v", err)
	}
}

// TestConcurrent: builds on one Definitions may run at once (go test -race).
func TestConcurrent(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	d := New(scheme)
	names := []string{"io.k8s.api.core.v1.Pod", "io.k8s.api.apps.v1.Deployment"}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Go(func() {
			schemas, err := d.V3(names[i%2])
			if err == nil && schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"] == nil {
				err = errors.New("no Quantity")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
