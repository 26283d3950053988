package devcluster_test

import (
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The write path's cost through the gateway (TLS, admission, the write
// semantics, etcd): issue 11 asks that upstream's validation, defaulting
// and strategies not slow it by more than they cost themselves
// (gateway/internal/builtin's benchmarks).

// BenchmarkCreatePod creates one Pod (two containers) per op as JSON.
func BenchmarkCreatePod(b *testing.B) {
	c := cluster(b)
	cs := clientset(b, c, true, nil)
	ns := uniqueNS("benchw")
	ensureNamespace(b, cs, ns)
	rc := newRawClient(b, c)
	pod := fullPod(ns, "")
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	path := "/api/v1/namespaces/" + ns + "/pods"
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		pod.Name = fmt.Sprintf("p-%d", i)
		body, err := json.Marshal(pod)
		if err != nil {
			b.Fatal(err)
		}
		if resp, data := rc.do(b, "POST", path, body, "Content-Type", "application/json"); resp.StatusCode != 201 {
			b.Fatalf("POST %s: %d %s", path, resp.StatusCode, data)
		}
	}
}

// BenchmarkUpdateDeployment replaces one Deployment per op (a label
// alternates, so every update changes the object but not its generation),
// unconditionally as `kubectl replace` does.
func BenchmarkUpdateDeployment(b *testing.B) {
	c := cluster(b)
	cs := clientset(b, c, true, nil)
	ns := uniqueNS("benchw")
	ensureNamespace(b, cs, ns)
	rc := newRawClient(b, c)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       fullPod(ns, "x").Spec,
			},
		},
	}
	body, err := json.Marshal(d)
	if err != nil {
		b.Fatal(err)
	}
	if resp, data := rc.do(b, "POST", "/apis/apps/v1/namespaces/"+ns+"/deployments", body, "Content-Type", "application/json"); resp.StatusCode != 201 {
		b.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	path := "/apis/apps/v1/namespaces/" + ns + "/deployments/web"
	bodies := make([][]byte, 2)
	d.Generation = 1
	for i := range bodies {
		d.Labels = map[string]string{"round": fmt.Sprint(i)}
		if bodies[i], err = json.Marshal(d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if resp, data := rc.do(b, "PUT", path, bodies[i%2], "Content-Type", "application/json"); resp.StatusCode != 200 {
			b.Fatalf("PUT %s: %d %s", path, resp.StatusCode, data)
		}
	}
}
