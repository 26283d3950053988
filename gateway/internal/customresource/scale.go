package customresource

import (
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Scale is the scale subresource of one served version of a CRD: its
// paths, as apiextensions-apiserver's ScaleREST reads and writes them
// (pkg/registry/customresource/etcd.go). That REST runs on the generic
// registry store and keeps its helpers unexported, hence these twins of
// scaleFromCustomResource and scaleUpdatedObjectInfo's replicas write.
type Scale struct {
	SpecReplicasPath   string
	StatusReplicasPath string
	LabelSelectorPath  string
}

// ScaleOf returns the scale subresource of crd's version, or nil when it
// serves none.
func ScaleOf(crd *apiextensionsv1.CustomResourceDefinition, version string) (*Scale, error) {
	sub, err := apihelpers.GetSubresourcesForVersion(crd, version)
	if err != nil {
		return nil, fmt.Errorf("cannot read the subresources of %s %s: %w", crd.Name, version, err)
	}
	if sub == nil || sub.Scale == nil {
		return nil, nil
	}
	s := &Scale{SpecReplicasPath: sub.Scale.SpecReplicasPath, StatusReplicasPath: sub.Scale.StatusReplicasPath}
	if sub.Scale.LabelSelectorPath != nil {
		s.LabelSelectorPath = *sub.Scale.LabelSelectorPath
	}
	return s, nil
}

// ReplicasPaths returns the replicas field of each version of crd that
// serves a scale subresource (nil for those that do not), as upstream's
// crdHandler gives them to managedfields.NewScaleHandler.
func ReplicasPaths(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.ResourcePathMappings, error) {
	out := managedfields.ResourcePathMappings{}
	for _, v := range crd.Spec.Versions {
		gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String()
		s, err := ScaleOf(crd, v.Name)
		if err != nil {
			return nil, err
		}
		if s == nil {
			out[gv] = nil
			continue
		}
		var path fieldpath.Path
		for _, element := range splitPath(s.SpecReplicasPath) {
			name := element
			path = append(path, fieldpath.PathElement{FieldName: &name})
		}
		out[gv] = path
	}
	return out, nil
}

// splitPath splits a replicas or selector path at its periods, ignoring
// the leading one.
func splitPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

// Of returns the autoscaling/v1 Scale of cr and whether its spec replicas
// field is set.
func (s *Scale) Of(cr *unstructured.Unstructured) (*autoscalingv1.Scale, bool, error) {
	spec, found, err := unstructured.NestedInt64(cr.UnstructuredContent(), splitPath(s.SpecReplicasPath)...)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read the spec replicas of %s: %w", cr.GetName(), err)
	}
	status, _, err := unstructured.NestedInt64(cr.UnstructuredContent(), splitPath(s.StatusReplicasPath)...)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read the status replicas of %s: %w", cr.GetName(), err)
	}
	var selector string
	if s.LabelSelectorPath != "" {
		if selector, _, err = unstructured.NestedString(cr.UnstructuredContent(), splitPath(s.LabelSelectorPath)...); err != nil {
			return nil, false, fmt.Errorf("cannot read the label selector of %s: %w", cr.GetName(), err)
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name: cr.GetName(), Namespace: cr.GetNamespace(), UID: cr.GetUID(),
			ResourceVersion: cr.GetResourceVersion(), CreationTimestamp: cr.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: selector},
	}, found, nil
}

// SetReplicas writes replicas into a copy of cr's spec replicas field.
func (s *Scale) SetReplicas(cr *unstructured.Unstructured, replicas int32) (*unstructured.Unstructured, error) {
	out := cr.DeepCopy()
	if err := unstructured.SetNestedField(out.Object, int64(replicas), splitPath(s.SpecReplicasPath)...); err != nil {
		return nil, fmt.Errorf("cannot set the spec replicas of %s: %w", cr.GetName(), err)
	}
	return out, nil
}
