package builtin

import (
	"slices"
	"testing"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/storage"
)

// TestDeleteCRD: the first delete of a CRD marks it (deletionTimestamp,
// the cleanup finalizer, Terminating) as apiextensions-apiserver's REST
// does; while the finalizer is there it stays; without it, it goes.
func TestDeleteCRD(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Generation: 3}}
	next, action, err := deleteCRD(crd.DeepCopy(), &metav1.DeleteOptions{})
	if err != nil || action != storage.DeleteUpdate {
		t.Fatalf("first delete: action %v, %v; want update", action, err)
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
	if _, action, err := deleteCRD(got.DeepCopy(), &metav1.DeleteOptions{}); err != nil || action != storage.DeleteKeep {
		t.Errorf("second delete with the finalizer: action %v, %v; want keep", action, err)
	}
	got.Finalizers = nil
	if _, action, err := deleteCRD(got, &metav1.DeleteOptions{}); err != nil || action != storage.DeleteRemove {
		t.Errorf("delete without finalizers: action %v, %v; want remove", action, err)
	}
	uid := "other"
	if _, _, err := deleteCRD(crd.DeepCopy(), &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: (*types.UID)(&uid)}}); err == nil {
		t.Error("a uid precondition that does not match: no error")
	}
}
