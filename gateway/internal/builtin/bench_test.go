package builtin

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage/registry"
)

// The cost upstream's semantics add to one write: defaulting, two
// conversions, the strategy and validation (issue 11 asks the write path
// not to slow down by more than this).
func BenchmarkCreatePod(b *testing.B) {
	s, err := New(registry.Builtin())
	if err != nil {
		b.Fatal(err)
	}
	pods := mustResource(b, "", "pods")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", Labels: labels()},
		Spec: corev1.PodSpec{Containers: []corev1.Container{container()}}}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.Create(context.Background(), pods, "", pod.DeepCopy())
		if err != nil || len(got.Errors) > 0 {
			b.Fatal(err, got.Errors)
		}
	}
}

func BenchmarkUpdateDeployment(b *testing.B) {
	s, err := New(registry.Builtin())
	if err != nil {
		b.Fatal(err)
	}
	deployments := mustResource(b, "apps", "deployments")
	old := deploymentAt(1, 2, 2)
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.Update(context.Background(), deployments, "", deploymentAt(1, 3, 2), old)
		if err != nil || len(got.Errors) > 0 {
			b.Fatal(err, got.Errors)
		}
	}
}
