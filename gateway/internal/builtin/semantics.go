package builtin

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kgate/kgate/storage/registry"
)

var (
	// ErrUnknown is returned for a resource with no upstream strategy.
	ErrUnknown = errors.New("builtin: no upstream strategy for the resource")
	// ErrSubresource is returned for a subresource whose writes upstream
	// does not run through a registry strategy of the resource.
	ErrSubresource = errors.New("builtin: no upstream strategy for the subresource")
)

// Semantics applies upstream's defaulting, conversion and registry
// strategies to the served built-in resources. It is safe for concurrent
// use.
type Semantics struct {
	scheme     *runtime.Scheme
	strategies map[schema.GroupResource]strategies
}

// New returns the semantics of resources, which must each have an upstream
// strategy or be one of the create-only resources that are never stored
// (the review APIs, bindings).
func New(resources []registry.Resource) (*Semantics, error) {
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	table := newStrategies(s, resolverFor(resources))
	sem := &Semantics{scheme: s, strategies: make(map[schema.GroupResource]strategies)}
	for i := range resources {
		r := &resources[i]
		gr := r.GVR().GroupResource()
		if _, exempt := noStrategy[gr]; exempt {
			continue
		}
		st, ok := table[gr]
		if !ok {
			return nil, fmt.Errorf("cannot serve %s with upstream semantics: %w", gr, ErrUnknown)
		}
		if !s.Recognizes(r.GVK()) {
			return nil, fmt.Errorf("cannot serve %s with upstream semantics: kind %s is not in upstream's scheme", gr, r.GVK())
		}
		sem.strategies[gr] = st
	}
	return sem, nil
}

// A Result is the outcome of a write: the object as upstream would store
// it (versioned, as served by res), the warnings for the client, and the
// field errors that make the write invalid (422). Object is nil when
// Errors is not empty.
type Result struct {
	Object   runtime.Object
	Warnings []string
	Errors   field.ErrorList
}

// Default applies upstream's defaulters to a versioned object, in place,
// as kube-apiserver's decoder does.
func (s *Semantics) Default(obj runtime.Object) {
	s.scheme.Default(obj)
}

// Create applies upstream's create semantics to obj, a versioned object of
// res as decoded from the request (defaulted in place): defaulting, name
// generation from metadata.generateName, conversion to the internal type,
// the strategy's PrepareForCreate, validation (the strategy's, then
// ObjectMeta's, then declarative), WarningsOnCreate, Canonicalize, and
// conversion back. Only the resource itself is created through a strategy:
// subresource creates (binding, eviction, token) return ErrSubresource.
func (s *Semantics) Create(ctx context.Context, res *registry.Resource, subresource string, obj runtime.Object) (Result, error) {
	st, err := s.lookup(res, subresource)
	if err != nil {
		return Result{}, err
	}
	if subresource != "" {
		return Result{}, fmt.Errorf("cannot create %s/%s: %w", res.Resource, subresource, ErrSubresource)
	}
	strat := st.main
	s.scheme.Default(obj)
	if err := generateName(strat, obj); err != nil {
		return Result{}, err
	}
	internal, err := s.toInternal(res, obj)
	if err != nil {
		return Result{}, err
	}
	ctx, err = requestContext(ctx, res, subresource, "create", internal)
	if err != nil {
		return Result{}, err
	}
	strat.PrepareForCreate(ctx, internal)
	if errs := rest.ValidateCreate(ctx, internal, strat); len(errs) > 0 {
		return Result{Errors: errs}, nil
	}
	warnings := strat.WarningsOnCreate(ctx, internal)
	strat.Canonicalize(internal)
	out, err := s.toVersioned(res, internal)
	if err != nil {
		return Result{}, err
	}
	return Result{Object: out, Warnings: warnings}, nil
}

// Update applies upstream's update semantics to obj, the new versioned
// object of res (defaulted in place), over old, the stored one (not
// modified): defaulting, conversion, the generation kept from old, the
// strategy's PrepareForUpdate (which resets what the subresource may not
// change and bumps the generation), uid and timestamps kept from old,
// validation, WarningsOnUpdate, Canonicalize and conversion back. The
// strategy is the subresource's own (status, finalize, ...) or, for ""
// and "scale", the resource's: upstream updates scale through the parent
// object with the main strategy, so obj is then the parent with its new
// replicas.
func (s *Semantics) Update(ctx context.Context, res *registry.Resource, subresource string, obj, old runtime.Object) (Result, error) {
	st, err := s.lookup(res, subresource)
	if err != nil {
		return Result{}, err
	}
	var strat rest.RESTUpdateStrategy = st.main
	if sub, ok := st.sub[subresource]; ok {
		strat = sub
	} else if subresource != "" && subresource != "scale" {
		return Result{}, fmt.Errorf("cannot update %s/%s: %w", res.Resource, subresource, ErrSubresource)
	}
	s.scheme.Default(obj)
	old = old.DeepCopyObject()
	s.scheme.Default(old)
	internal, err := s.toInternal(res, obj)
	if err != nil {
		return Result{}, err
	}
	oldInternal, err := s.toInternal(res, old)
	if err != nil {
		return Result{}, err
	}
	ctx, err = requestContext(ctx, res, subresource, "update", internal)
	if err != nil {
		return Result{}, err
	}
	m, err := meta.Accessor(internal)
	if err != nil {
		return Result{}, fmt.Errorf("cannot update %s: %w", res.Resource, err)
	}
	oldMeta, err := meta.Accessor(oldInternal)
	if err != nil {
		return Result{}, fmt.Errorf("cannot update %s: %w", res.Resource, err)
	}
	// As rest.BeforeUpdate: a request never sets the generation; the
	// strategy bumps it.
	m.SetGeneration(oldMeta.GetGeneration())
	strat.PrepareForUpdate(ctx, internal, oldInternal)
	KeepSystemFields(m, oldMeta)
	if errs := rest.ValidateUpdate(ctx, internal, oldInternal, strat); len(errs) > 0 {
		return Result{Errors: errs}, nil
	}
	warnings := strat.WarningsOnUpdate(ctx, internal, oldInternal)
	strat.Canonicalize(internal)
	out, err := s.toVersioned(res, internal)
	if err != nil {
		return Result{}, err
	}
	return Result{Object: out, Warnings: warnings}, nil
}

// GenerateName sets metadata.name of obj from metadata.generateName with
// the resource's own name generator when the name is empty, as upstream
// does before admission and validation (so a generateName-only object
// validates with the name it will be stored under). It does nothing when
// the name is set or generateName is empty.
func (s *Semantics) GenerateName(res *registry.Resource, obj runtime.Object) error {
	st, err := s.lookup(res, "")
	if err != nil {
		return err
	}
	return generateName(st.main, obj)
}

func generateName(gen interface{ GenerateName(string) string }, obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("cannot generate a name: %w", err)
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(gen.GenerateName(m.GetGenerateName()))
	}
	return nil
}

func (s *Semantics) lookup(res *registry.Resource, subresource string) (strategies, error) {
	gr := res.GVR().GroupResource()
	st, ok := s.strategies[gr]
	if !ok {
		if subresource != "" {
			gr.Resource += "/" + subresource
		}
		return strategies{}, fmt.Errorf("cannot apply upstream semantics to %s: %w", gr, ErrUnknown)
	}
	return st, nil
}

// toInternal converts a versioned object of res to upstream's internal
// type (a copy: obj is not modified).
func (s *Semantics) toInternal(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	out, err := s.scheme.ConvertToVersion(obj, schema.GroupVersion{Group: res.Group, Version: runtime.APIVersionInternal})
	if err != nil {
		return nil, fmt.Errorf("cannot convert %s to the internal version: %w", res.Kind, err)
	}
	return out, nil
}

// toVersioned converts an internal object back to the version res serves.
func (s *Semantics) toVersioned(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	out, err := s.scheme.ConvertToVersion(obj, res.GVR().GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("cannot convert %s to %s: %w", res.Kind, res.APIVersion(), err)
	}
	return out, nil
}

// requestContext returns ctx with what upstream's strategies and
// declarative validation read from it: the request's namespace and its
// RequestInfo (API group, version, resource, subresource).
func requestContext(ctx context.Context, res *registry.Resource, subresource, verb string, obj runtime.Object) (context.Context, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot read the metadata of %s: %w", res.Kind, err)
	}
	prefix := "apis"
	if res.Group == "" {
		prefix = "api"
	}
	ns := ""
	if res.Namespaced {
		ns = m.GetNamespace()
	}
	ctx = genericapirequest.WithNamespace(ctx, ns)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true,
		Path:              "",
		Verb:              verb,
		APIPrefix:         prefix,
		APIGroup:          res.Group,
		APIVersion:        res.Version,
		Namespace:         ns,
		Resource:          res.Resource,
		Subresource:       subresource,
		Name:              m.GetName(),
	}), nil
}

// KeepSystemFields carries over from old what an update request never
// sets, as rest.BeforeUpdate does: the uid (when the request has none),
// the creation timestamp, and a deletion already under way.
func KeepSystemFields(m, old metav1.Object) {
	if m.GetUID() == "" {
		m.SetUID(old.GetUID())
	}
	if t := old.GetCreationTimestamp(); !t.IsZero() {
		m.SetCreationTimestamp(t)
	}
	if !old.GetDeletionTimestamp().IsZero() {
		m.SetDeletionTimestamp(old.GetDeletionTimestamp())
	}
	if old.GetDeletionGracePeriodSeconds() != nil && m.GetDeletionGracePeriodSeconds() == nil {
		m.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	}
}
