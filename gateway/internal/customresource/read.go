package customresource

import (
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kgate/kgate/storage/registry"
)

// ReadDefaults returns what upstream's storage decoder does to a custom
// resource of res read from etcd (its storage version, before any
// conversion to the served one): the defaults of the storage version's
// schema, applied in place. It returns nil when that schema has no
// defaults, or res is not a custom resource: such objects are served as
// stored, their bytes passed through.
func (s *Semantics) ReadDefaults(res *registry.Resource) func(*unstructured.Unstructured) {
	if res.CRD == nil {
		return nil
	}
	name := res.Version
	if res.StorageKind.Kind != "" {
		name = res.StorageKind.Version
	}
	v, err := s.version(res.CRD, name)
	if err != nil || !v.hasDefaults {
		return nil // a version that cannot be built fails the request elsewhere
	}
	return v.defaults
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
