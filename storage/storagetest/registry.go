package storagetest

import (
	"testing"

	"github.com/kgate/kgate/storage/registry"
)

// RegistryWithout returns the built-in registry without the core resource
// named resource (e.g. "configmaps"), and that resource, for tests that
// add it at run time.
func RegistryWithout(t testing.TB, resource string) (*registry.Registry, registry.Resource) {
	t.Helper()
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	var base []registry.Resource
	var left registry.Resource
	for _, r := range registry.Builtin() {
		if r.Group == "" && r.Resource == resource {
			left = r
			continue
		}
		base = append(base, r)
	}
	if left.Resource == "" {
		t.Fatalf("no core resource %q among the built-ins", resource)
	}
	reg, err := registry.New(scheme, base)
	if err != nil {
		t.Fatal(err)
	}
	return reg, left
}
