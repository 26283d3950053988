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
	// A graceful deletion takes two requests (the first sets
	// deletionTimestamp, the kubelet's removes the pod) and a finalized one
	// an update too: each refunds once in all.
	deleting := pod("300m")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	p.Finish(context.Background(), &admission.Attributes{Resource: pods, Operation: admission.Delete, Namespace: "ns", Name: "p", OldObject: pod("300m")}, deleting, nil)
	p.Finish(context.Background(), &admission.Attributes{Resource: pods, Operation: admission.Update, Namespace: "ns", Name: "p", OldObject: deleting, Object: deleting.DeepCopy()}, nil, nil)
	p.Finish(context.Background(), &admission.Attributes{Resource: pods, Operation: admission.Delete, Namespace: "ns", Name: "p", OldObject: deleting}, nil, nil)
	if u, n := e.q.Status.Used["requests.cpu"], e.q.Status.Used["pods"]; u.String() != "300m" || n.String() != "1" {
		t.Errorf("used after a graceful delete = %s cpu, %s pods; want 300m, 1", u.String(), n.String())
	}
	// A pod that runs to completion stops using quota (status update).
	done := pod("300m")
	done.Status.Phase = corev1.PodSucceeded
	p.Finish(context.Background(), &admission.Attributes{Resource: pods, Subresource: "status", Operation: admission.Update, Namespace: "ns", Name: "p", OldObject: pod("300m"), Object: done}, nil, nil)
	p.Finish(context.Background(), &admission.Attributes{Resource: pods, Operation: admission.Delete, Namespace: "ns", Name: "p", OldObject: done}, nil, nil)
	if u, n := e.q.Status.Used["requests.cpu"], e.q.Status.Used["pods"]; u.String() != "0" || n.String() != "0" {
		t.Errorf("used after a completed pod and its deletion = %s cpu, %s pods; want 0, 0", u.String(), n.String())
	}
}

var services = &registry.Resource{Version: "v1", Resource: "services", Kind: "Service", Namespaced: true}
var pvcs = &registry.Resource{Version: "v1", Resource: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", Namespaced: true}

func TestQuotaUpdates(t *testing.T) {
	hard := corev1.ResourceList{"services.nodeports": resource.MustParse("2"), "services.loadbalancers": resource.MustParse("1"),
		"requests.storage": resource.MustParse("10Gi"), "requests.cpu": resource.MustParse("1")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: hard},
		Status: corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{}}}
	e := &etcd{q: q}
	p := Plugin{List: list{q}, Quotas: e}
	used := func(n corev1.ResourceName) string {
		e.mu.Lock()
		defer e.mu.Unlock()
		u := e.q.Status.Used[n]
		return u.String()
	}
	svc := func(typ corev1.ServiceType, ports int) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{Type: typ}}
		for i := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: int32(80 + i)})
		}
		return s
	}
	pvc := func(size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	}
	update := func(res *registry.Resource, sub string, obj, old runtime.Object, storeErr error) error {
		t.Helper()
		a := &admission.Attributes{Resource: res, Subresource: sub, Operation: admission.Update, Namespace: "ns", Name: "x", Object: obj, OldObject: old}
		err := admission.Chain{p}.Validate(context.Background(), a)
		if err == nil {
			admission.Chain{p}.Finish(context.Background(), a, obj, storeErr)
		}
		return err
	}
	// ClusterIP → NodePort charges its ports.
	if err := update(services, "", svc(corev1.ServiceTypeNodePort, 1), svc(corev1.ServiceTypeClusterIP, 1), nil); err != nil {
		t.Fatal(err)
	}
	if u := used("services.nodeports"); u != "1" {
		t.Errorf("nodeports after NodePort = %s, want 1", u)
	}
	// Two more ports exceed; nothing is charged.
	err := update(services, "", svc(corev1.ServiceTypeNodePort, 2), svc(corev1.ServiceTypeClusterIP, 2), nil)
	want := "exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=1, limited: services.nodeports=2"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
	// NodePort → LoadBalancer with the same ports charges only the load
	// balancer; a failed write refunds it.
	if err := update(services, "", svc(corev1.ServiceTypeLoadBalancer, 1), svc(corev1.ServiceTypeNodePort, 1), errors.New("conflict")); err != nil {
		t.Fatal(err)
	}
	if u, n := used("services.loadbalancers"), used("services.nodeports"); u != "0" || n != "1" {
		t.Errorf("after a failed write: loadbalancers = %s, nodeports = %s, want 0 and 1", u, n)
	}
	// A status update charges nothing; going back to ClusterIP refunds.
	if err := update(services, "status", svc(corev1.ServiceTypeNodePort, 2), svc(corev1.ServiceTypeClusterIP, 2), nil); err != nil {
		t.Fatal(err)
	}
	if err := update(services, "", svc(corev1.ServiceTypeClusterIP, 1), svc(corev1.ServiceTypeNodePort, 1), nil); err != nil {
		t.Fatal(err)
	}
	if n := used("services.nodeports"); n != "0" {
		t.Errorf("nodeports after ClusterIP again = %s, want 0", n)
	}
	// A PVC's storage growing charges the growth only.
	if err := update(pvcs, "", pvc("8Gi"), pvc("5Gi"), nil); err != nil {
		t.Fatal(err)
	}
	if u := used("requests.storage"); u != "3Gi" {
		t.Errorf("requests.storage = %s, want 3Gi", u)
	}
	if err := update(pvcs, "", pvc("20Gi"), pvc("8Gi"), nil); !apierrors.IsForbidden(err) {
		t.Errorf("PVC over quota: err = %v, want 403", err)
	}
	// A pod resized up charges the delta.
	if err := update(pods, "resize", pod("700m"), pod("500m"), nil); err != nil {
		t.Fatal(err)
	}
	if u := used("requests.cpu"); u != "200m" {
		t.Errorf("requests.cpu = %s, want 200m", u)
	}
}
