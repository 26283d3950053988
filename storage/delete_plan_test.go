package storage

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestPlanDelete(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s := &Store{now: func() time.Time { return now.Add(400 * time.Millisecond) }}
	ptr := func(n int64) *int64 { return &n }
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }

	type want struct {
		action     deleteAction
		deletion   *metav1.Time
		grace      *int64
		generation int64
		finalizers []string
	}
	f := func(name string, obj runtime.Object, opts DeleteOptions, w want) {
		t.Run(name, func(t *testing.T) {
			before := obj.DeepCopyObject()
			got, action := s.planDelete(obj, opts)
			if action != w.action {
				t.Fatalf("action %d, want %d", action, w.action)
			}
			if !equality.Semantic.DeepEqual(before, obj) {
				t.Error("planDelete changed its input")
			}
			if action != updateObject {
				if got != obj {
					t.Error("keep/remove did not return the current object")
				}
				return
			}
			m := got.(metav1.Object)
			if !m.GetDeletionTimestamp().Equal(w.deletion) {
				t.Errorf("deletionTimestamp %v, want %v", m.GetDeletionTimestamp(), w.deletion)
			}
			if g := m.GetDeletionGracePeriodSeconds(); g == nil || w.grace == nil || *g != *w.grace {
				t.Errorf("deletionGracePeriodSeconds %v, want %v", g, w.grace)
			}
			if m.GetGeneration() != w.generation {
				t.Errorf("generation %d, want %d", m.GetGeneration(), w.generation)
			}
			if len(w.finalizers) != len(m.GetFinalizers()) {
				t.Errorf("finalizers %v, want %v", m.GetFinalizers(), w.finalizers)
			}
		})
	}
	cm := func(finalizers []string, deletion *metav1.Time, grace *int64) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: finalizers, DeletionTimestamp: deletion, DeletionGracePeriodSeconds: grace}}
	}
	pod := func(node string, tgps *int64, phase corev1.PodPhase, finalizers []string, deletion *metav1.Time, grace *int64) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Generation: 1, Finalizers: finalizers, DeletionTimestamp: deletion, DeletionGracePeriodSeconds: grace},
			Spec:       corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: tgps},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	fin := []string{"f"}

	f("plain", cm(nil, nil, nil), DeleteOptions{}, want{action: removeObject})
	f("finalizer", cm(fin, nil, nil), DeleteOptions{}, want{action: updateObject, deletion: at(0), grace: ptr(0), finalizers: fin})
	f("finalizer, deleting since earlier", cm(fin, at(-time.Hour), ptr(0)), DeleteOptions{}, want{action: updateObject, deletion: at(-time.Hour), grace: ptr(0), finalizers: fin})
	f("foreground", cm(nil, nil, nil), DeleteOptions{PropagationPolicy: "Foreground"}, want{action: updateObject, deletion: at(0), grace: ptr(0), finalizers: []string{"foregroundDeletion"}})
	f("grace ignored for other kinds", cm(nil, nil, nil), DeleteOptions{GracePeriodSeconds: ptr(30)}, want{action: removeObject})

	f("bound pod, default grace", pod("n", nil, "", nil, nil, nil), DeleteOptions{}, want{action: updateObject, deletion: at(30 * time.Second), grace: ptr(30), generation: 2})
	f("bound pod, spec grace", pod("n", ptr(3), "", nil, nil, nil), DeleteOptions{}, want{action: updateObject, deletion: at(3 * time.Second), grace: ptr(3), generation: 2})
	f("bound pod, option grace", pod("n", ptr(3), "", nil, nil, nil), DeleteOptions{GracePeriodSeconds: ptr(8)}, want{action: updateObject, deletion: at(8 * time.Second), grace: ptr(8), generation: 2})
	f("bound pod, negative grace", pod("n", nil, "", nil, nil, nil), DeleteOptions{GracePeriodSeconds: ptr(-5)}, want{action: updateObject, deletion: at(time.Second), grace: ptr(1), generation: 2})
	f("bound pod, grace 0", pod("n", nil, "", nil, nil, nil), DeleteOptions{GracePeriodSeconds: ptr(0)}, want{action: removeObject})
	f("bound pod, grace 0, finalizer", pod("n", nil, "", fin, nil, nil), DeleteOptions{GracePeriodSeconds: ptr(0)}, want{action: updateObject, deletion: at(0), grace: ptr(0), generation: 2, finalizers: fin})
	f("unbound pod", pod("", nil, "", nil, nil, nil), DeleteOptions{}, want{action: removeObject})
	f("failed pod", pod("n", nil, corev1.PodFailed, nil, nil, nil), DeleteOptions{}, want{action: removeObject})
	f("pending graceful, no option", pod("n", nil, "", nil, at(20*time.Second), ptr(30)), DeleteOptions{}, want{action: keepObject})
	f("pending graceful, longer", pod("n", nil, "", nil, at(20*time.Second), ptr(30)), DeleteOptions{GracePeriodSeconds: ptr(30)}, want{action: keepObject})
	f("pending graceful, shorter", pod("n", nil, "", nil, at(20*time.Second), ptr(30)), DeleteOptions{GracePeriodSeconds: ptr(15)}, want{action: updateObject, deletion: at(5 * time.Second), grace: ptr(15), generation: 1})
	f("pending graceful, shorter into the past", pod("n", nil, "", nil, at(20*time.Second), ptr(30)), DeleteOptions{GracePeriodSeconds: ptr(5)}, want{action: updateObject, deletion: at(0), grace: ptr(1), generation: 1})
	f("pending graceful, grace 0", pod("n", nil, "", nil, at(20*time.Second), ptr(30)), DeleteOptions{GracePeriodSeconds: ptr(0)}, want{action: removeObject})
	f("pending graceful, grace 0, finalizer", pod("n", nil, "", fin, at(20*time.Second), ptr(30)), DeleteOptions{GracePeriodSeconds: ptr(0)}, want{action: updateObject, deletion: at(0), grace: ptr(0), generation: 1, finalizers: fin})
	f("pod deleting with grace 0 and finalizer", pod("n", nil, "", fin, at(-time.Minute), ptr(0)), DeleteOptions{}, want{action: updateObject, deletion: at(-time.Minute), grace: ptr(0), generation: 1, finalizers: fin})
	f("pod deleting with grace 0", pod("n", nil, "", nil, at(-time.Minute), ptr(0)), DeleteOptions{}, want{action: removeObject})
}

func TestDeleteOnUpdate(t *testing.T) {
	ptr := func(n int64) *int64 { return &n }
	ts := metav1.Now()
	f := func(name string, m metav1.ObjectMeta, want bool) {
		t.Run(name, func(t *testing.T) {
			if got := deleteOnUpdate(&m); got != want {
				t.Errorf("deleteOnUpdate = %v, want %v", got, want)
			}
		})
	}
	f("not deleting", metav1.ObjectMeta{}, false)
	f("deleting, finalizer left", metav1.ObjectMeta{DeletionTimestamp: &ts, DeletionGracePeriodSeconds: ptr(0), Finalizers: []string{"f"}}, false)
	f("deleting, no finalizer", metav1.ObjectMeta{DeletionTimestamp: &ts, DeletionGracePeriodSeconds: ptr(0)}, true)
	f("graceful pod, no finalizer", metav1.ObjectMeta{DeletionTimestamp: &ts, DeletionGracePeriodSeconds: ptr(30)}, false)
	f("no grace period recorded", metav1.ObjectMeta{DeletionTimestamp: &ts}, false)
}

func TestPreconditions(t *testing.T) {
	m := &metav1.ObjectMeta{UID: "u1"}
	f := func(name string, p Preconditions, rev int64, wantErr bool) {
		t.Run(name, func(t *testing.T) {
			if err := p.check(m, rev); (err != nil) != wantErr {
				t.Errorf("check = %v, want error %v", err, wantErr)
			}
		})
	}
	f("none", Preconditions{}, 5, false)
	f("rv matches", Preconditions{ResourceVersion: 5}, 5, false)
	f("rv differs", Preconditions{ResourceVersion: 4}, 5, true)
	f("uid matches", Preconditions{UID: "u1"}, 5, false)
	f("uid differs", Preconditions{UID: "u2"}, 5, true)
}

func TestPlanDeleteNamespace(t *testing.T) {
	s := &Store{now: func() time.Time { return time.Unix(1700000000, 0) }}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	next, action := s.planDelete(ns, DeleteOptions{})
	if action != updateObject {
		t.Fatalf("first delete: action %v, want update", action)
	}
	got := next.(*corev1.Namespace)
	if got.DeletionTimestamp == nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("first delete did not start termination: %+v", got)
	}
	if _, action := s.planDelete(got, DeleteOptions{}); action != keepObject {
		t.Fatalf("delete with spec.finalizers left: action %v, want keep", action)
	}
	got.Spec.Finalizers = nil
	if _, action := s.planDelete(got, DeleteOptions{}); action != removeObject {
		t.Fatalf("delete after finalize: action %v, want remove", action)
	}
}

func TestPlanDeleteCRD(t *testing.T) {
	s := &Store{now: func() time.Time { return time.Unix(1700000000, 0) }}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Generation: 3}}
	next, action := s.planDelete(crd, DeleteOptions{})
	if action != updateObject {
		t.Fatalf("first delete: action %v, want update", action)
	}
	got := next.(*apiextensionsv1.CustomResourceDefinition)
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 0 {
		t.Errorf("first delete: deletionTimestamp %v, grace %v; want now and 0", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	if !slices.Equal(got.Finalizers, []string{apiextensionsv1.CustomResourceCleanupFinalizer}) || got.Generation != 3 {
		t.Errorf("first delete: finalizers %v, generation %d; want the cleanup finalizer, generation kept", got.Finalizers, got.Generation)
	}
	c := apiextensionshelpers.FindCRDCondition(got, apiextensionsv1.Terminating)
	if c == nil || c.Status != apiextensionsv1.ConditionTrue || c.Reason != "InstanceDeletionPending" {
		t.Errorf("Terminating condition %+v, want True InstanceDeletionPending", c)
	}
	// Being deleted with the finalizer: kept until the controller removes it.
	if again, action := s.planDelete(got, DeleteOptions{}); action == removeObject ||
		!again.(*apiextensionsv1.CustomResourceDefinition).DeletionTimestamp.Equal(got.DeletionTimestamp) {
		t.Errorf("second delete: action %v, want the CRD kept as it is", action)
	}
	if !slices.Equal(crd.Finalizers, nil) {
		t.Error("planDelete changed its input")
	}
}
