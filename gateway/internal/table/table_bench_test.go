package table

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/registry"
)

// benchPods returns n running Pods of two containers each, as a
// controller makes them.
func benchPods(n int) []runtime.Object {
	created := metav1.NewTime(time.Now().Add(-3 * time.Hour))
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("web-7d4b9c-%05d", i), Namespace: "default", UID: "0b8f6c2e-1111-4d2e-9a51-000000000000",
				ResourceVersion: "12345", CreationTimestamp: created,
				Labels: map[string]string{"app": "web", "pod-template-hash": "7d4b9c"},
			},
			Spec: corev1.PodSpec{
				NodeName: fmt.Sprintf("node-%d", i%50),
				Containers: []corev1.Container{
					{Name: "app", Image: "registry.example/web:1.2.3", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
					{Name: "sidecar", Image: "registry.example/proxy:0.9"},
				},
			},
			Status: corev1.PodStatus{
				Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.%d.%d", i/250, i%250),
				PodIPs:     []corev1.PodIP{{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{
					{Name: "app", Ready: true, RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}},
					{Name: "sidecar", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}},
				},
			},
		}
	}
	return objs
}

func benchResource(b *testing.B, gvr schema.GroupVersionResource) *registry.Resource {
	b.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	res, ok := reg.Lookup(gvr)
	if !ok {
		b.Fatalf("no resource %s", gvr)
	}
	return res
}

// BenchmarkConvert1000Pods is the table of a 1,000-Pod list (kubectl get pods).
func BenchmarkConvert1000Pods(b *testing.B) {
	res := benchResource(b, corev1.SchemeGroupVersion.WithResource("pods"))
	objs := benchPods(1000)
	c, err := newConverter()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Convert(objs, res, ""); err != nil {
			b.Fatal(err)
		}
	}
}
