package customresource

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage/registry"
)

// Converter converts custom resources between the versions of their CRD
// by its conversion strategy (crconvert.Converter).
type Converter interface {
	Convert(crd *apiextensionsv1.CustomResourceDefinition, obj *unstructured.Unstructured, version string) (*unstructured.Unstructured, error)
	// ConvertList converts the items of one list in one call (one
	// ConversionReview for a webhook).
	ConvertList(crd *apiextensionsv1.CustomResourceDefinition, items []*unstructured.Unstructured, version string) ([]*unstructured.Unstructured, error)
}

// ConvertCustomResource returns obj, a custom resource of res's CRD in
// whatever version it is (as stored, or as a request sent it), in
// version: obj itself when it is in it already, else a new object (obj
// is not modified). A failed conversion is upstream's 500 with the
// converter's message (for a webhook: "conversion webhook for <gvk>
// failed: ...").
func (s *Semantics) ConvertCustomResource(res *registry.Resource, obj *unstructured.Unstructured, version string) (*unstructured.Unstructured, error) {
	out, err := s.conv.Convert(res.CRD, obj, version)
	if err != nil {
		return nil, apierror.ConversionFailed(err)
	}
	return out, nil
}

// ConvertCustomResources is ConvertCustomResource for the items of one
// list, converted in one call as upstream converts a list: one
// ConversionReview for a webhook, not one per object.
func (s *Semantics) ConvertCustomResources(res *registry.Resource, objs []*unstructured.Unstructured, version string) ([]*unstructured.Unstructured, error) {
	out, err := s.conv.ConvertList(res.CRD, objs, version)
	if err != nil {
		return nil, apierror.ConversionFailed(err)
	}
	return out, nil
}

// ConvertsReads reports whether objects of res read from storage may
// need converting to be served as res: its CRD has more than one
// version, so objects stored in another one (written before its storage
// version changed) may be there.
func (s *Semantics) ConvertsReads(res *registry.Resource) bool {
	return res.CRD != nil && len(res.CRD.Spec.Versions) > 1
}
