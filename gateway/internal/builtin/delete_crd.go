package builtin

import (
	"fmt"
	"time"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
)

// deleteCRD is apiextensions-apiserver's CustomResourceDefinition
// REST.Delete: the uid and resourceVersion preconditions, then on the
// first delete the deletion timestamp, the cleanup finalizer and the
// Terminating condition (the CRD controller deletes the custom objects,
// then removes the finalizer, which removes the CRD); once deleting, it
// stays while the finalizer or any other is there.
func deleteCRD(crd *apiextensionsv1.CustomResourceDefinition, opts *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error) {
	gr := schema.GroupResource{Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions"}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != crd.UID {
			return nil, 0, apierror.Conflict(gr, crd.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, crd.UID))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != crd.ResourceVersion {
			return nil, 0, apierror.Conflict(gr, crd.Name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, crd.ResourceVersion))
		}
	}
	if crd.DeletionTimestamp.IsZero() {
		now := metav1.NewTime(time.Now())
		zero := int64(0)
		crd.DeletionTimestamp, crd.DeletionGracePeriodSeconds = &now, &zero
		if !apiextensionshelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
			crd.Finalizers = append(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
		}
		apiextensionshelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type:    apiextensionsv1.Terminating,
			Status:  apiextensionsv1.ConditionTrue,
			Reason:  "InstanceDeletionPending",
			Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
		})
		return crd, storage.DeleteUpdate, nil
	}
	if len(crd.Finalizers) > 0 {
		return crd, storage.DeleteKeep, nil
	}
	return crd, storage.DeleteRemove, nil
}
