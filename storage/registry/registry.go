package registry

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Registry is an immutable index of served resources plus the scheme that
// knows their Go types.
type Registry struct {
	scheme    *runtime.Scheme
	resources []*Resource
	byGVR     map[schema.GroupVersionResource]*Resource
	groups    []GroupVersions
}

// GroupVersions is one API group with its served versions, preferred first.
type GroupVersions struct {
	Group    string
	Versions []string
}

// New builds a registry from resources. Each resource's served kind must
// be known to scheme.
func New(scheme *runtime.Scheme, resources []Resource) (*Registry, error) {
	r := &Registry{scheme: scheme, byGVR: make(map[schema.GroupVersionResource]*Resource)}
	seenGroup := map[string]int{}
	for i := range resources {
		res := &resources[i]
		if res.Resource == "" || res.Kind == "" || res.Version == "" || (res.Prefix == "" && !res.CreateOnly()) {
			return nil, fmt.Errorf("cannot register %v: resource, kind, version and prefix are required", res.GVR())
		}
		if _, dup := r.byGVR[res.GVR()]; dup {
			return nil, fmt.Errorf("cannot register %v: registered twice", res.GVR())
		}
		if !scheme.Recognizes(res.GVK()) {
			return nil, fmt.Errorf("cannot register %v: kind %v unknown to the scheme", res.GVR(), res.GVK())
		}
		if len(res.FieldSelectors) > 0 && res.Fields == nil {
			return nil, fmt.Errorf("cannot register %v: field selectors without a Fields func", res.GVR())
		}
		r.resources = append(r.resources, res)
		r.byGVR[res.GVR()] = res
		gi, ok := seenGroup[res.Group]
		if !ok {
			gi = len(r.groups)
			seenGroup[res.Group] = gi
			r.groups = append(r.groups, GroupVersions{Group: res.Group})
		}
		g := &r.groups[gi]
		if !contains(g.Versions, res.Version) {
			g.Versions = append(g.Versions, res.Version)
		}
	}
	return r, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Scheme returns the scheme of the registered types.
func (r *Registry) Scheme() *runtime.Scheme { return r.scheme }

// Lookup returns the resource served at group/version/resource.
func (r *Registry) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	res, ok := r.byGVR[gvr]
	return res, ok
}

// Resources returns all resources in registration order.
func (r *Registry) Resources() []*Resource { return r.resources }

// Groups returns the API groups in registration order (the core group,
// named "", first when registered first).
func (r *Registry) Groups() []GroupVersions { return r.groups }

// GroupVersionResources returns the resources of one group/version, sorted
// by name.
func (r *Registry) GroupVersionResources(group, version string) []*Resource {
	var out []*Resource
	for _, res := range r.resources {
		if res.Group == group && res.Version == version {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// New returns a new empty object of the resource's served kind.
func (r *Registry) New(res *Resource) (runtime.Object, error) {
	obj, err := r.scheme.New(res.GVK())
	if err != nil {
		return nil, fmt.Errorf("cannot make %v: %w", res.GVK(), err)
	}
	return obj, nil
}

// NewStored returns a new empty object of the resource's storage kind.
func (r *Registry) NewStored(res *Resource) (runtime.Object, error) {
	obj, err := r.scheme.New(res.StorageGVK())
	if err != nil {
		return nil, fmt.Errorf("cannot make %v: %w", res.StorageGVK(), err)
	}
	return obj, nil
}
