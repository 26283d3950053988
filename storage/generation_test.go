package storage

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/registry"
)

func TestTracksGeneration(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{}
	f := func(gvr schema.GroupVersionResource, obj runtime.Object, want bool) {
		t.Helper()
		res, ok := reg.Lookup(gvr)
		if !ok {
			t.Fatalf("%v not registered", gvr)
		}
		if got := s.tracksGeneration(res, obj); got != want {
			t.Errorf("tracksGeneration(%v) = %v, want %v", gvr, got, want)
		}
	}
	f(appsv1.SchemeGroupVersion.WithResource("deployments"), &appsv1.Deployment{}, true)
	f(corev1.SchemeGroupVersion.WithResource("pods"), &corev1.Pod{}, true)
	// Services, namespaces and nodes have a spec but no generation upstream.
	f(corev1.SchemeGroupVersion.WithResource("services"), &corev1.Service{}, false)
	f(corev1.SchemeGroupVersion.WithResource("namespaces"), &corev1.Namespace{}, false)
	f(corev1.SchemeGroupVersion.WithResource("configmaps"), &corev1.ConfigMap{}, false)
	cm := corev1.SchemeGroupVersion.WithResource("configmaps")
	f(cm, &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}, true)
	f(cm, &unstructured.Unstructured{Object: map[string]any{"data": "x"}}, false)
}

func TestSpecChanged(t *testing.T) {
	s := &Store{}
	two, three := int32(2), int32(3)
	base := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec:       appsv1.DeploymentSpec{Replicas: &two},
	}
	f := func(name string, mutate func(d *appsv1.Deployment), want bool) {
		t.Run(name, func(t *testing.T) {
			d := base.DeepCopy()
			mutate(d)
			if got := s.specChanged(base, d); got != want {
				t.Errorf("specChanged = %v, want %v", got, want)
			}
		})
	}
	f("nothing", func(*appsv1.Deployment) {}, false)
	f("labels", func(d *appsv1.Deployment) { d.Labels = map[string]string{"a": "b"} }, false)
	f("status", func(d *appsv1.Deployment) { d.Status.Replicas = 9 }, false)
	f("kind", func(d *appsv1.Deployment) { d.Kind = "" }, false)
	f("spec", func(d *appsv1.Deployment) { d.Spec.Replicas = &three }, true)
	f("spec pointer to an equal value", func(d *appsv1.Deployment) { v := int32(2); d.Spec.Replicas = &v }, false)

	// Fields outside spec count too.
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "1"}}
	cm2 := cm.DeepCopy()
	cm2.Data["a"] = "2"
	if !s.specChanged(cm, cm2) {
		t.Error("ConfigMap data change not seen")
	}

	u := &unstructured.Unstructured{Object: map[string]any{"kind": "X", "spec": map[string]any{"a": int64(1)}, "status": "s"}}
	u2 := u.DeepCopy()
	u2.Object["status"] = "t"
	u2.Object["metadata"] = map[string]any{"name": "n"}
	if s.specChanged(u, u2) {
		t.Error("unstructured status/metadata change counted")
	}
	u2.Object["spec"] = map[string]any{"a": int64(2)}
	if !s.specChanged(u, u2) {
		t.Error("unstructured spec change not seen")
	}
}
