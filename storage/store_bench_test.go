package storage_test

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
)

// benchPod is a Pod of a typical size (about 1.5 KB of JSON).
func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "bench", Name: name,
			Labels:      map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "5d8f7c9b6"},
			Annotations: map[string]string{"kubernetes.io/config.seen": "2026-03-04T05:06:07Z"},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "default", RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example.com/web:1.2.3",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "LOG_LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.12", HostIP: "192.168.1.10"},
	}
}

func BenchmarkGet(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	pods := e.pods()
	e.create(pods, benchPod("p"))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.store.Get(ctx, pods, "bench", "p", 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreate(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	pods := e.pods()
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		i++
		if _, err := e.store.Create(ctx, pods, benchPod("p"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpdate(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	pods := e.pods()
	e.create(pods, benchPod("p"))
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		i++
		_, err := e.store.Update(ctx, pods, "bench", "p", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
			cur.(*corev1.Pod).Labels["n"] = strconv.Itoa(i)
			return cur, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
