package fieldmanager

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kgate/kgate/storage/registry"
)

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// replicasPaths map each version of a scalable resource to its replicas
// field, as upstream's scale REST hands them to managedfields.NewScaleHandler:
// the ReplicasPathMappings of k8s.io/kubernetes's
// pkg/registry/{apps/deployment,apps/replicaset,apps/statefulset,core/replicationcontroller}/storage,
// which cannot be imported (they link the generic registry store and the
// cacher; deploy/archtest).
var replicasPaths = map[schema.GroupResource]managedfields.ResourcePathMappings{
	{Group: "apps", Resource: "deployments"}:  appsReplicas(),
	{Group: "apps", Resource: "replicasets"}:  appsReplicas(),
	{Group: "apps", Resource: "statefulsets"}: appsReplicas(),
	{Resource: "replicationcontrollers"}:      {"v1": fieldpath.MakePathOrDie("spec", "replicas")},
}

func appsReplicas() managedfields.ResourcePathMappings {
	return managedfields.ResourcePathMappings{
		"apps/v1beta1": fieldpath.MakePathOrDie("spec", "replicas"),
		"apps/v1beta2": fieldpath.MakePathOrDie("spec", "replicas"),
		"apps/v1":      fieldpath.MakePathOrDie("spec", "replicas"),
	}
}

// ScaleFields moves managedFields between a scalable object and its
// autoscaling/v1 Scale, as upstream's scale REST does around the scale
// FieldManager (managedfields.ScaleHandler): ToScale gives the Scale the
// parent's entries that own its replicas, ToParent folds the Scale's
// entries back into the parent's.
type ScaleFields struct {
	handler *managedfields.ScaleHandler
}

// NewScaleFields returns the ScaleFields of an object of res whose
// managedFields are parent.
func NewScaleFields(res *registry.Resource, parent []metav1.ManagedFieldsEntry) (*ScaleFields, error) {
	paths, ok := replicasPaths[res.GVR().GroupResource()]
	if !ok {
		return nil, fmt.Errorf("cannot move the managed fields of %s to its scale: not a scalable resource", res.GVR().GroupResource())
	}
	return &ScaleFields{handler: managedfields.NewScaleHandler(parent, res.GVR().GroupVersion(), paths)}, nil
}

// NewCustomScaleFields returns the ScaleFields of a custom resource of
// the group version gv whose managedFields are parent; paths are its
// CRD's replicas fields by version (customresource.ReplicasPaths).
func NewCustomScaleFields(gv schema.GroupVersion, paths managedfields.ResourcePathMappings, parent []metav1.ManagedFieldsEntry) *ScaleFields {
	return &ScaleFields{handler: managedfields.NewScaleHandler(parent, gv, paths)}
}

// ToScale returns the managedFields of the Scale.
func (s *ScaleFields) ToScale() ([]metav1.ManagedFieldsEntry, error) {
	entries, err := s.handler.ToSubresource()
	if err != nil {
		return nil, fmt.Errorf("cannot move managed fields to the scale: %w", err)
	}
	return entries, nil
}

// ToParent returns the parent's managedFields once the Scale's are scale.
func (s *ScaleFields) ToParent(scale []metav1.ManagedFieldsEntry) ([]metav1.ManagedFieldsEntry, error) {
	entries, err := s.handler.ToParent(scale)
	if err != nil {
		return nil, fmt.Errorf("cannot move managed fields from the scale: %w", err)
	}
	return entries, nil
}
