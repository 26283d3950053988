package seed

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLayout(t *testing.T) {
	l := Layout{Prefix: "kgate-bench", Set: "seed", Namespaces: 3, Pods: 10}
	if ns, name := l.Pod(4); ns != "kgate-bench-seed-1" || name != "pod-000004" {
		t.Fatalf("Pod(4) = %s/%s", ns, name)
	}
	total := 0
	for k := range l.Namespaces {
		total += l.PodsIn(k)
	}
	if total != 10 || l.PodsIn(0) != 4 || l.PodsIn(2) != 3 {
		t.Fatalf("PodsIn: %d %d %d", l.PodsIn(0), l.PodsIn(1), l.PodsIn(2))
	}
}

func TestPodsAgainstFake(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	l := Layout{Prefix: "kgate-bench", Set: "seed", Namespaces: 2, Pods: 20, ConfigMaps: 4, ConfigMapBytes: 512}
	if err := Namespaces(ctx, c, l.AllNamespaces()); err != nil {
		t.Fatal(err)
	}
	if err := Namespaces(ctx, c, l.AllNamespaces()); err != nil {
		t.Fatalf("second run: %v", err)
	}
	s, err := Pods(ctx, Config{Client: c, Layout: l, Concurrency: 4}, 0, l.Pods)
	if err != nil || s.Created != 20 || s.Failed != 0 {
		t.Fatalf("Pods: %+v, %v", s, err)
	}
	// The fake server adds managedFields, as kube-apiserver does.
	if s.PodJSONBytes < 4600 || s.PodJSONBytes > 9000 {
		t.Fatalf("mean pod JSON %v bytes", s.PodJSONBytes)
	}
	p, err := c.CoreV1().Pods("kgate-bench-seed-1").Get(ctx, "pod-000003", metav1.GetOptions{})
	if err != nil || p.Status.Phase != "Running" || len(p.Status.ContainerStatuses) != 2 {
		t.Fatalf("seeded pod: %v, %v", p, err)
	}
	// Again: everything exists already.
	s, err = Pods(ctx, Config{Client: c, Layout: l}, 0, l.Pods)
	if err != nil || s.Existing != 20 || s.Created != 0 {
		t.Fatalf("reseeding: %+v, %v", s, err)
	}
	cs, err := ConfigMaps(ctx, Config{Client: c, Layout: l})
	if err != nil || cs.Created != 4 || cs.JSONBytes < 4*512 {
		t.Fatalf("ConfigMaps: %+v, %v", cs, err)
	}
}

func TestTransient(t *testing.T) {
	if !transient(apierrors.NewTooManyRequests("x", 1)) || transient(apierrors.NewBadRequest("x")) {
		t.Fatal("transient misclassifies")
	}
}
