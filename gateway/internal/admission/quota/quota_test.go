package quota

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/storage/registry"
)

type list []runtime.Object

func (l list) List(string) []runtime.Object { return l }

// etcd is a quota store with compare-and-swap semantics under a lock.
type etcd struct {
	mu sync.Mutex
	q  *corev1.ResourceQuota
}

func (e *etcd) Get(context.Context, string, string) (*corev1.ResourceQuota, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.q.DeepCopy(), nil
}

func (e *etcd) Update(_ context.Context, _, _ string, f func(q *corev1.ResourceQuota) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.q.DeepCopy()
	if err := f(q); err != nil {
		return err
	}
	e.q = q
	return nil
}

var pods = &registry.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}

func pod(cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
	}}}}
}

func TestQuota(t *testing.T) {
	hard := corev1.ResourceList{"pods": resource.MustParse("10"), "requests.cpu": resource.MustParse("1")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: hard},
		Status: corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"pods": resource.MustParse("0"), "requests.cpu": resource.MustParse("0")}}}
	e := &etcd{q: q}
	p := Plugin{List: list{q}, Quotas: e}
	create := func(cpu string, dry bool) (*admission.Attributes, error) {
		a := &admission.Attributes{Resource: pods, Operation: admission.Create, Namespace: "ns", Name: "p", Object: pod(cpu), DryRun: dry}
		return a, p.Validate(context.Background(), a)
	}
	// Concurrent charges never exceed the quota: ten 300m pods, 1 CPU.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 10 {
		wg.Go(func() {
			if _, err := create("300m", false); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	used := e.q.Status.Used["requests.cpu"]
	if ok != 3 || used.String() != "900m" {
		t.Errorf("admitted %d, used %s; want 3 and 900m", ok, used.String())
	}
	_, err := create("200m", false)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: q, requested: requests.cpu=200m, used: requests.cpu=900m, limited: requests.cpu=1") {
		t.Errorf("over: err = %v", err)
	}
	// A dry run checks without charging; a failed write is refunded.
	if _, err := create("100m", true); err != nil {
		t.Fatal(err)
	}
	a, err := create("100m", false)
	if err != nil {
		t.Fatal(err)
	}
	if u := e.q.Status.Used["requests.cpu"]; u.String() != "1" {
		t.Errorf("used = %s, want 1", u.String())
	}
	admission.Chain{p}.Finish(context.Background(), a, nil, errors.New("etcd said no"))
	if u := e.q.Status.Used["requests.cpu"]; u.String() != "900m" {
		t.Errorf("used after refund = %s, want 900m", u.String())
	}
	// A deletion refunds.
	del := &admission.Attributes{Resource: pods, Operation: admission.Delete, Namespace: "ns", Name: "p", OldObject: pod("300m")}
	p.Finish(context.Background(), del, nil, nil)
	if u, n := e.q.Status.Used["requests.cpu"], e.q.Status.Used["pods"]; u.String() != "600m" || n.String() != "2" {
		t.Errorf("used after delete = %s cpu, %s pods; want 600m, 2", u.String(), n.String())
	}
}
