package devcluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestNamespaceFinalize does what kube-controller-manager's namespace
// controller does once a deleted namespace is empty: it removes the
// kubernetes finalizer through namespaces/finalize, and the namespace is
// gone then, as upstream's namespace storage deletes it during that
// update; a metadata finalizer still holds it until removed.
func TestNamespaceFinalize(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	for _, held := range []bool{false, true} {
		ns := uniqueNS("finalize")
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if held {
			obj.Finalizers = []string{"example.com/hold"}
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("namespace %s right after its delete: %v", ns, err)
		}
		if got.Status.Phase != corev1.NamespaceTerminating || len(got.Spec.Finalizers) != 1 || got.DeletionTimestamp == nil {
			t.Fatalf("deleted namespace: phase %s, spec.finalizers %v, deletionTimestamp %v; want Terminating, [kubernetes], set",
				got.Status.Phase, got.Spec.Finalizers, got.DeletionTimestamp)
		}
		got.Spec.Finalizers = nil
		if _, err := cs.CoreV1().Namespaces().Finalize(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("finalize: %v", err)
		}
		got, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if !held {
			if !apierrors.IsNotFound(err) {
				t.Errorf("namespace after finalize: %v (phase %s), want NotFound", err, got.Status.Phase)
			}
			continue
		}
		if err != nil {
			t.Fatalf("namespace held by a finalizer, after finalize: %v", err)
		}
		if _, err := cs.CoreV1().Namespaces().Patch(ctx, ns, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("remove the metadata finalizer: %v", err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace after its last finalizer went: %v, want NotFound", err)
		}
	}
}
