package devcluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestEviction evicts through client-go's Evict (what kubectl drain
// calls) with a PodDisruptionBudget whose status the test keeps as the
// disruption controller would: the first eviction is allowed and charged,
// the second refused with upstream's 429.
func TestEviction(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, false, nil)
	ctx := context.Background()
	ns := uniqueNS("evict")
	ensureNamespace(t, cs, ns)

	for _, name := range []string{"a", "b"} {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s status: %v", name, err)
		}
	}
	one := intstr.FromInt32(1)
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PDB: %v", err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("PDB status: %v", err)
	}

	evict := func(name string) error {
		return cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	if err := evict("a"); err != nil {
		t.Fatalf("evict a: %v", err)
	}
	a, err := cs.CoreV1().Pods(ns).Get(ctx, "a", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatalf("get a: %v", err)
	case a.DeletionTimestamp == nil:
		t.Errorf("pod a evicted but not being deleted")
	}
	got, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Status.DisruptedPods["a"]; got.Status.DisruptionsAllowed != 0 || !ok {
		t.Errorf("PDB status after the eviction: %+v", got.Status)
	}

	err = evict("b")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evict b: %v, want 429", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Errorf("429 details %+v", st.Details)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "b", metav1.GetOptions{}); err != nil {
		t.Errorf("pod b: %v (must survive)", err)
	}
}
