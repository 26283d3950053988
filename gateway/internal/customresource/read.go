package customresource

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kgate/kgate/storage/registry"
)

// ReadDefaults returns what upstream's storage decoder does to a custom
// resource of res read from etcd (in the version it was stored in,
// before any conversion to the served one): the defaults of that
// version's schema, applied in place. It returns nil when no version's
// schema has defaults, or res is not a custom resource: such objects are
// served as stored, their bytes passed through.
func (s *Semantics) ReadDefaults(res *registry.Resource) func(*unstructured.Unstructured) {
	if res.CRD == nil {
		return nil
	}
	crd := res.CRD
	has := false
	for _, cv := range crd.Spec.Versions {
		v, err := s.version(crd, cv.Name)
		if err == nil && v.hasDefaults {
			has = true
			break
		}
	}
	if !has {
		return nil // a version that cannot be built fails the request elsewhere
	}
	return func(u *unstructured.Unstructured) {
		v, err := s.version(crd, u.GroupVersionKind().Version)
		if err != nil || !v.hasDefaults {
			return
		}
		v.defaults(u)
	}
}

// hasDefaults reports whether a structural schema sets a default anywhere.
func hasDefaults(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if s.Default.Object != nil {
		return true
	}
	for _, p := range s.Properties {
		if hasDefaults(&p) {
			return true
		}
	}
	if s.AdditionalProperties != nil && hasDefaults(s.AdditionalProperties.Structural) {
		return true
	}
	return hasDefaults(s.Items)
}
