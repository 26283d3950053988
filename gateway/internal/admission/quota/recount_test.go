package quota

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// objects is an Objects of fixed objects by resource.
type objects map[string][]runtime.Object

func (o objects) Objects(_ context.Context, _, res, _ string) ([]runtime.Object, error) {
	return o[res], nil
}

// racingEtcd changes the quota once, between a recount's read and its
// write, as a charge by another gateway would.
type racingEtcd struct {
	*etcd
	race func(q *corev1.ResourceQuota)
}

func (r *racingEtcd) Update(ctx context.Context, ns, name string, f func(q *corev1.ResourceQuota) error) error {
	if r.race != nil {
		r.mu.Lock()
		r.race(r.q)
		r.mu.Unlock()
		r.race = nil
	}
	return r.etcd.Update(ctx, ns, name, f)
}

func TestRecount(t *testing.T) {
	hard := corev1.ResourceList{"pods": resource.MustParse("10"), "count/configmaps": resource.MustParse("5")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: hard},
		Status: corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"pods": resource.MustParse("3"), "count/configmaps": resource.MustParse("0")}}}
	done := pod("100m")
	done.Status.Phase = corev1.PodSucceeded
	objs := objects{
		"pods":       {pod("100m"), done},
		"configmaps": {&corev1.ConfigMap{}, &corev1.ConfigMap{}},
	}
	e := &racingEtcd{etcd: &etcd{q: q}}
	r := NewRecounter(Plugin{List: list{q}, Quotas: e, Objects: objs})
	used := func(n corev1.ResourceName) string {
		u := e.q.Status.Used[n]
		return u.String()
	}
	ctx := context.Background()

	// Round 1: uncharged configmaps are counted at once; pods look too
	// high (3 charged, 1 running) but might be writes in flight.
	if n, err := r.Round(ctx); err != nil || n != 1 {
		t.Fatalf("round 1: %d updated, %v", n, err)
	}
	if used("count/configmaps") != "2" || used("pods") != "3" {
		t.Fatalf("after round 1: configmaps %s pods %s, want 2 and 3", used("count/configmaps"), used("pods"))
	}
	// Round 2, another gateway charges a pod between the count and the
	// write: nothing is stored, the count may miss that pod.
	e.race = func(q *corev1.ResourceQuota) { q.Status.Used["pods"] = resource.MustParse("4") }
	if n, err := r.Round(ctx); err != nil || n != 0 {
		t.Fatalf("round 2: %d updated, %v; want nothing stored", n, err)
	}
	if used("pods") != "4" {
		t.Fatalf("after round 2: pods %s, want the other gateway's 4", used("pods"))
	}
	// Round 3 sees pods too high by 3 now, more than before (2): a charge
	// may be in flight, still not lowered. Round 4 sees the same: lowered.
	if n, err := r.Round(ctx); err != nil || n != 0 || used("pods") != "4" {
		t.Fatalf("round 3: %d updated, %v, pods %s; want nothing stored", n, err, used("pods"))
	}
	if n, err := r.Round(ctx); err != nil || n != 1 || used("pods") != "1" {
		t.Fatalf("round 4: %d updated, %v, pods %s; want 1 (the completed pod does not count)", n, err, used("pods"))
	}
	if n, err := r.Round(ctx); err != nil || n != 0 {
		t.Fatalf("round 5: %d updated, %v; want nothing to do", n, err)
	}
}
