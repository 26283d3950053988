package fieldmanager_test

import (
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/fieldmanager"
	"github.com/kgate/kgate/storage/registry"
)

// BenchmarkNewTypeConverter is the startup cost of the type converter:
// time and allocations per build, and the heap one converter keeps once
// used (retained-MB: after a write of a Deployment and a Pod, which fills
// its lazily built indexes).
func BenchmarkNewTypeConverter(b *testing.B) {
	sem, err := builtin.New(registry.Builtin())
	if err != nil {
		b.Fatal(err)
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ReportAllocs()
	var tc managedfields.TypeConverter
	t0 := time.Now()
	for b.Loop() {
		if tc, err = fieldmanager.NewTypeConverter(sem.Scheme()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(t0).Milliseconds())/float64(b.N), "ms/build")
	m, err := fieldmanager.New(fieldmanager.Config{Scheme: sem.Scheme(), TypeConverter: tc, ResetFields: sem.ResetFields})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Update(resource(b, "apps", "deployments"), "", nil, benchDeployment("ns"), "bench"); err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: benchDeployment("ns").Spec.Template.Spec}
	if _, err := m.Update(resource(b, "", "pods"), "", nil, pod, "bench"); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/(1<<20), "retained-MB")
	runtime.KeepAlive(m)
}

func benchDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": "web", "tier": "front"}
	replicas := int32(3)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels, Annotations: map[string]string{"note": "bench"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.25",
					Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 443, Protocol: corev1.ProtocolTCP}},
					Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
				}, {
					Name: "sidecar", Image: "busybox", Command: []string{"sleep", "infinity"},
				}}},
			},
		},
	}
}

// BenchmarkUpdate is what managedFields add to a create and to an update
// of a Deployment (the field manager's Update operation), the cost the
// write path pays on every write.
func BenchmarkUpdate(b *testing.B) {
	m := managers(b)
	deps := resource(b, "apps", "deployments")
	b.Run("create", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Update(deps, "", nil, benchDeployment("ns"), "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update", func(b *testing.B) {
		live, err := m.Update(deps, "", nil, benchDeployment("ns"), "creator")
		if err != nil {
			b.Fatal(err)
		}
		next := live.DeepCopyObject().(*appsv1.Deployment)
		next.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Update(deps, "", live, next.DeepCopy(), "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkApply is a server-side apply of a Deployment: creating it, and
// re-applying it with a change.
func BenchmarkApply(b *testing.B) {
	m := managers(b)
	deps := resource(b, "apps", "deployments")
	patch := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"app":"web"}},
"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
"spec":{"containers":[{"name":"web","image":"nginx:1.25","ports":[{"containerPort":80}]},{"name":"sidecar","image":"busybox"}]}}}}`)
	b.Run("create", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Apply(deps, "", nil, patch, "bench", false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("re-apply", func(b *testing.B) {
		live, err := m.Apply(deps, "", nil, patch, "bench", false)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Apply(deps, "", live, patch, "bench", false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
