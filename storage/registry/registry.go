package registry

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Errors of Add and Remove, wrapped.
var (
	// ErrInvalid: a resource lacks a required field, names a kind the
	// scheme does not know, or its prefix nests in another's.
	ErrInvalid = errors.New("registry: invalid resource")
	// ErrExists: the group/version/resource is registered already.
	ErrExists = errors.New("registry: resource already registered")
	// ErrNotFound: the group/version/resource is not registered.
	ErrNotFound = errors.New("registry: resource not registered")
)

// Registry is the set of served resources plus the scheme that knows their
// Go types. It changes at run time (Add, Remove: custom resources and
// aggregated APIs come and go) and is safe for concurrent use. Reads are
// lock-free: each answers from the current Snapshot, an immutable value
// replaced whole on every change. A resource that stays registered keeps
// its *Resource across changes, so callers may hold on to it and compare
// pointers.
type Registry struct {
	scheme *runtime.Scheme

	mu   sync.Mutex // serializes writers (Add, Remove)
	snap atomic.Pointer[Snapshot]
}

// Snapshot is the registry at one generation. It never changes.
type Snapshot struct {
	gen       uint64
	scheme    *runtime.Scheme
	resources []*Resource
	byGVR     map[schema.GroupVersionResource]*Resource
	groups    []GroupVersions
	// next is closed when a newer snapshot replaces this one.
	next chan struct{}
}

// GroupVersions is one API group with its served versions, preferred first.
type GroupVersions struct {
	Group    string
	Versions []string
}

// New builds a registry from resources (built-ins first, by convention).
// Each resource's served kind must be known to scheme.
func New(scheme *runtime.Scheme, resources []Resource) (*Registry, error) {
	r := &Registry{scheme: scheme}
	s, err := r.build(nil, resources, nil)
	if err != nil {
		return nil, err
	}
	r.snap.Store(s)
	return r, nil
}

// build returns a snapshot holding the resources of base (kept as they
// are) minus remove, plus add, in that order.
func (r *Registry) build(base []*Resource, add []Resource, remove map[schema.GroupVersionResource]bool) (*Snapshot, error) {
	s := &Snapshot{scheme: r.scheme, byGVR: map[schema.GroupVersionResource]*Resource{}, next: make(chan struct{})}
	for _, res := range base {
		if !remove[res.GVR()] {
			s.resources = append(s.resources, res)
			s.byGVR[res.GVR()] = res
		}
	}
	for i := range add {
		res := clone(&add[i])
		if err := r.validate(s, res); err != nil {
			return nil, err
		}
		s.resources = append(s.resources, res)
		s.byGVR[res.GVR()] = res
	}
	seenGroup := map[string]int{}
	for _, res := range s.resources {
		gi, ok := seenGroup[res.Group]
		if !ok {
			gi = len(s.groups)
			seenGroup[res.Group] = gi
			s.groups = append(s.groups, GroupVersions{Group: res.Group})
		}
		g := &s.groups[gi]
		if !slices.Contains(g.Versions, res.Version) {
			g.Versions = append(g.Versions, res.Version)
		}
	}
	return s, nil
}

// validate checks res against the resources already in s.
func (r *Registry) validate(s *Snapshot, res *Resource) error {
	if res.Resource == "" || res.Kind == "" || res.Version == "" || (res.Prefix == "" && !res.CreateOnly()) {
		return fmt.Errorf("cannot register %v: resource, kind, version and prefix are required: %w", res.GVR(), ErrInvalid)
	}
	if _, dup := s.byGVR[res.GVR()]; dup {
		return fmt.Errorf("cannot register %v: %w", res.GVR(), ErrExists)
	}
	// Every kind is a Go type of the scheme but a custom resource's,
	// served as unstructured.
	if !res.Unstructured() && !r.scheme.Recognizes(res.GVK()) {
		return fmt.Errorf("cannot register %v: kind %v unknown to the scheme: %w", res.GVR(), res.GVK(), ErrInvalid)
	}
	if len(res.FieldSelectors) > 0 && res.Fields == nil {
		return fmt.Errorf("cannot register %v: field selectors without a Fields func: %w", res.GVR(), ErrInvalid)
	}
	for label, f := range res.FieldLabels {
		if !res.SupportsField(f) {
			return fmt.Errorf("cannot register %v: field label %s stands for %s, not a field selector of the resource: %w", res.GVR(), label, f, ErrInvalid)
		}
	}
	if res.Prefix != "" {
		// Ranges are key intervals per prefix: one prefix must not hold
		// another's keys. Equal prefixes share objects (core and
		// events.k8s.io events) and are fine.
		for _, o := range s.resources {
			if o.Prefix != "" && o.Prefix != res.Prefix &&
				(strings.HasPrefix(res.Prefix, o.Prefix+"/") || strings.HasPrefix(o.Prefix, res.Prefix+"/")) {
				return fmt.Errorf("cannot register %v: prefix %s nests with %s of %v: %w", res.GVR(), res.Prefix, o.Prefix, o.GVR(), ErrInvalid)
			}
		}
	}
	return nil
}

// clone copies res with its own slices, so the caller's later changes do
// not reach the registry.
func clone(res *Resource) *Resource {
	c := *res
	c.ShortNames = slices.Clone(res.ShortNames)
	c.Categories = slices.Clone(res.Categories)
	c.Subresources = slices.Clone(res.Subresources)
	c.Verbs = slices.Clone(res.Verbs)
	c.FieldSelectors = slices.Clone(res.FieldSelectors)
	c.FieldLabels = maps.Clone(res.FieldLabels)
	return &c
}

// Add registers resources after those already served, all or none: it
// fails, changing nothing, when one is invalid (ErrInvalid) or already
// registered (ErrExists).
func (r *Registry) Add(resources ...Resource) error {
	if len(resources) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.snap.Load()
	s, err := r.build(cur.resources, resources, nil)
	if err != nil {
		return err
	}
	r.publish(cur, s)
	return nil
}

// Replace unregisters remove and registers add in one change, all or
// none: readers never see the resources of a changed custom resource
// definition missing in between. It fails, changing nothing, as Remove
// and Add do.
func (r *Registry) Replace(remove []schema.GroupVersionResource, add []Resource) error {
	if len(remove) == 0 && len(add) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.snap.Load()
	rm := make(map[schema.GroupVersionResource]bool, len(remove))
	for _, gvr := range remove {
		if _, ok := cur.byGVR[gvr]; !ok {
			return fmt.Errorf("cannot unregister %v: %w", gvr, ErrNotFound)
		}
		rm[gvr] = true
	}
	s, err := r.build(cur.resources, add, rm)
	if err != nil {
		return err
	}
	r.publish(cur, s)
	return nil
}

// Remove unregisters resources, all or none: it fails, changing nothing,
// when one is not registered (ErrNotFound).
func (r *Registry) Remove(gvrs ...schema.GroupVersionResource) error {
	if len(gvrs) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.snap.Load()
	remove := make(map[schema.GroupVersionResource]bool, len(gvrs))
	for _, gvr := range gvrs {
		if _, ok := cur.byGVR[gvr]; !ok {
			return fmt.Errorf("cannot unregister %v: %w", gvr, ErrNotFound)
		}
		remove[gvr] = true
	}
	s, err := r.build(cur.resources, nil, remove)
	if err != nil {
		return err
	}
	r.publish(cur, s)
	return nil
}

// publish makes s current in place of cur and wakes cur's followers.
// Called with mu held.
func (r *Registry) publish(cur, s *Snapshot) {
	s.gen = cur.gen + 1
	r.snap.Store(s)
	close(cur.next)
}

// Snapshot returns the current snapshot: several reads that must agree
// (a discovery document) take one and read it.
func (r *Registry) Snapshot() *Snapshot { return r.snap.Load() }

// Changed returns a channel closed at the next change. Changes coalesce: a
// follower takes the channel, reads the current snapshot, and waits.
func (r *Registry) Changed() <-chan struct{} { return r.snap.Load().next }

// Generation counts the changes since New: 0, then one more per Add or
// Remove.
func (r *Registry) Generation() uint64 { return r.snap.Load().gen }

// Scheme returns the scheme of the registered types.
func (r *Registry) Scheme() *runtime.Scheme { return r.scheme }

// Lookup returns the resource served at group/version/resource.
func (r *Registry) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	return r.snap.Load().Lookup(gvr)
}

// Resources returns all resources in registration order.
func (r *Registry) Resources() []*Resource { return r.snap.Load().Resources() }

// Groups returns the API groups in registration order (the core group,
// named "", first when registered first).
func (r *Registry) Groups() []GroupVersions { return r.snap.Load().Groups() }

// GroupVersionResources returns the resources of one group/version, sorted
// by name.
func (r *Registry) GroupVersionResources(group, version string) []*Resource {
	return r.snap.Load().GroupVersionResources(group, version)
}

// New returns a new empty object of the resource's served kind: an
// *unstructured.Unstructured with apiVersion and kind set for a custom
// resource.
func (r *Registry) New(res *Resource) (runtime.Object, error) {
	if res.Unstructured() {
		return newUnstructured(res.GVK()), nil
	}
	obj, err := r.scheme.New(res.GVK())
	if err != nil {
		return nil, fmt.Errorf("cannot make %v: %w", res.GVK(), err)
	}
	return obj, nil
}

// NewStored returns a new empty object of the resource's storage kind.
func (r *Registry) NewStored(res *Resource) (runtime.Object, error) {
	if res.Unstructured() {
		return newUnstructured(res.StorageGVK()), nil
	}
	obj, err := r.scheme.New(res.StorageGVK())
	if err != nil {
		return nil, fmt.Errorf("cannot make %v: %w", res.StorageGVK(), err)
	}
	return obj, nil
}

func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u
}

// Generation is the snapshot's place in the registry's history.
func (s *Snapshot) Generation() uint64 { return s.gen }

// Changed returns a channel closed when a newer snapshot replaces s.
func (s *Snapshot) Changed() <-chan struct{} { return s.next }

// Scheme returns the scheme of the registered types.
func (s *Snapshot) Scheme() *runtime.Scheme { return s.scheme }

// Lookup returns the resource served at group/version/resource.
func (s *Snapshot) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	res, ok := s.byGVR[gvr]
	return res, ok
}

// Resources returns all resources in registration order. The slice is
// shared: callers must not modify it.
func (s *Snapshot) Resources() []*Resource { return s.resources }

// Groups returns the API groups in registration order. The slice is
// shared: callers must not modify it.
func (s *Snapshot) Groups() []GroupVersions { return s.groups }

// GroupVersionResources returns the resources of one group/version, sorted
// by name.
func (s *Snapshot) GroupVersionResources(group, version string) []*Resource {
	var out []*Resource
	for _, res := range s.resources {
		if res.Group == group && res.Version == version {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}
