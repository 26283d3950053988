package rest

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var pdbsGVR = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")

func runningPod(name string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func budget(name string, allowed, current, desired int32) *policyv1.PodDisruptionBudget {
	min := intstr.FromInt32(desired)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed,
			CurrentHealthy: current, DesiredHealthy: desired, ExpectedPods: current},
	}
}

func evictionBody(name string) []byte {
	return []byte(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"` + name + `","namespace":"ns"}}`)
}

func TestEviction(t *testing.T) {
	t.Run("no budget: the pod is deleted", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("p"))
		if r.code != http.StatusCreated {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
		if p := e.stored(podsGVR, "ns", "p"); p != nil {
			t.Fatalf("pod still stored: %+v", p)
		}
	})
	t.Run("budget allows: charged, then deleted", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		e.seed(pdbsGVR, budget("pdb", 1, 3, 2))
		r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("p"))
		if r.code != http.StatusCreated {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
		pdb := e.stored(pdbsGVR, "ns", "pdb").(*policyv1.PodDisruptionBudget)
		if pdb.Status.DisruptionsAllowed != 0 {
			t.Errorf("disruptionsAllowed = %d, want 0", pdb.Status.DisruptionsAllowed)
		}
		if _, ok := pdb.Status.DisruptedPods["p"]; !ok {
			t.Errorf("disruptedPods = %v, want p recorded", pdb.Status.DisruptedPods)
		}
		if c := findCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("DisruptionAllowed condition %+v, want False once the budget is spent", c)
		}
		if e.stored(podsGVR, "ns", "p") != nil {
			t.Error("pod still stored")
		}
	})
	t.Run("budget forbids: 429 with upstream's cause", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		e.seed(pdbsGVR, budget("pdb", 0, 2, 2))
		r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("p"))
		if r.code != http.StatusTooManyRequests || r.reason() != metav1.StatusReasonTooManyRequests {
			t.Fatalf("evict: %d %+v, want 429 TooManyRequests", r.code, r.status)
		}
		if r.status.Message != "Cannot evict pod as it would violate the pod's disruption budget." {
			t.Errorf("message %q", r.status.Message)
		}
		if d := r.status.Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Type != policyv1.DisruptionBudgetCause ||
			d.Causes[0].Message != "The disruption budget pdb needs 2 healthy pods and has 2 currently" {
			t.Errorf("details %+v", r.status.Details)
		}
		if e.stored(podsGVR, "ns", "p") == nil {
			t.Error("pod deleted despite its budget")
		}
	})
	t.Run("budget not observed yet: 429 retry in 10s", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		b := budget("pdb", 1, 3, 2)
		b.Status.ObservedGeneration = 0
		e.seed(pdbsGVR, b)
		r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("p"))
		if r.code != http.StatusTooManyRequests || r.status.Details == nil || r.status.Details.RetryAfterSeconds != 10 {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
	})
	t.Run("two budgets: 500", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		e.seed(pdbsGVR, budget("a", 1, 3, 2), budget("b", 1, 3, 2))
		r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("p"))
		if r.code != 500 || r.status.Message != multiplePDBsMessage {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
	})
	t.Run("pending pod ignores its budget", func(t *testing.T) {
		e := newEnv(t)
		p := runningPod("p", false)
		p.Status.Phase = corev1.PodPending
		e.seed(podsGVR, p)
		e.seed(pdbsGVR, budget("pdb", 0, 2, 2))
		if r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("p")); r.code != http.StatusCreated {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
		if e.stored(podsGVR, "ns", "p") != nil {
			t.Error("pending pod still stored")
		}
	})
	t.Run("unready pod of a healthy budget goes uncharged", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", false))
		e.seed(pdbsGVR, budget("pdb", 0, 2, 2))
		if r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("p")); r.code != http.StatusCreated {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
		if pdb := e.stored(pdbsGVR, "ns", "pdb").(*policyv1.PodDisruptionBudget); len(pdb.Status.DisruptedPods) != 0 {
			t.Errorf("budget charged: %+v", pdb.Status)
		}
	})
	t.Run("dry run changes nothing", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		e.seed(pdbsGVR, budget("pdb", 1, 3, 2))
		if r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction?dryRun=All", evictionBody("p")); r.code != http.StatusCreated {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
		if e.stored(podsGVR, "ns", "p") == nil {
			t.Error("dry run deleted the pod")
		}
		if pdb := e.stored(pdbsGVR, "ns", "pdb").(*policyv1.PodDisruptionBudget); pdb.Status.DisruptionsAllowed != 1 {
			t.Errorf("dry run charged the budget: %+v", pdb.Status)
		}
	})
	t.Run("name mismatch: 400", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		r := e.do("POST", "/api/v1/namespaces/ns/pods/p/eviction", evictionBody("q"))
		if r.code != http.StatusBadRequest || r.status.Message != "name in URL does not match name in Eviction object" {
			t.Fatalf("evict: %d %+v", r.code, r.status)
		}
	})
	t.Run("only create", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, runningPod("p", true))
		if r := e.do("GET", "/api/v1/namespaces/ns/pods/p/eviction", nil); r.code != http.StatusMethodNotAllowed {
			t.Fatalf("GET eviction: %d", r.code)
		}
	})
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
