package fieldmanager

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	deploymentstorage "k8s.io/kubernetes/pkg/registry/apps/deployment/storage"
	replicasetstorage "k8s.io/kubernetes/pkg/registry/apps/replicaset/storage"
	statefulsetstorage "k8s.io/kubernetes/pkg/registry/apps/statefulset/storage"
	rcstorage "k8s.io/kubernetes/pkg/registry/core/replicationcontroller/storage"

	"github.com/kgate/kgate/storage/registry"
)

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// replicasPaths are upstream's mappings from each version of a scalable
// resource to its replicas field, which its scale REST hands to
// managedfields.NewScaleHandler.
var replicasPaths = map[schema.GroupResource]func() managedfields.ResourcePathMappings{
	{Group: "apps", Resource: "deployments"}:  deploymentstorage.ReplicasPathMappings,
	{Group: "apps", Resource: "replicasets"}:  replicasetstorage.ReplicasPathMappings,
	{Group: "apps", Resource: "statefulsets"}: statefulsetstorage.ReplicasPathMappings,
	{Resource: "replicationcontrollers"}:      rcstorage.ReplicasPathMappings,
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
	return &ScaleFields{handler: managedfields.NewScaleHandler(parent, res.GVR().GroupVersion(), paths())}, nil
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
