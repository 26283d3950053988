// Package customresource is kube-apiserver's write semantics of custom
// resources, from k8s.io/apiextensions-apiserver: what its decoder does
// (metadata coercion, pruning of unknown fields, defaulting), and its
// custom resource strategy (status and generation rules, OpenAPI schema
// validation, x-kubernetes-validations CEL rules with oldSelf and
// ratcheting, list-type checks, embedded resources) for the main resource
// and the status and scale subresources; the scale subresource's paths
// (Scale); the defaults upstream's storage decoder gives objects read
// from etcd (ReadDefaults); conversion between versions through the
// CRD's strategy (ConvertCustomResource). Semantics serves rest's Semantics: custom
// resources here, everything else through the built-in semantics it
// wraps.
package customresource

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// ErrSubresource is returned for a subresource write a custom resource
// does not serve (a status or scale it has not, or any other).
var ErrSubresource = errors.New("customresource: subresource not supported")

// Builtin is the semantics of every other resource (builtin.Semantics).
type Builtin interface {
	Scheme() *runtime.Scheme
	Default(obj runtime.Object)
	Create(ctx context.Context, res *registry.Resource, subresource string, obj runtime.Object) (builtin.Result, error)
	Update(ctx context.Context, res *registry.Resource, subresource string, obj, old runtime.Object) (builtin.Result, error)
	Delete(ctx context.Context, res *registry.Resource, obj runtime.Object, opts *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error)
	ReturnsDeletedObject(res *registry.Resource) bool
}

// Semantics applies upstream's semantics to custom resources and passes
// other resources to the built-in semantics. Safe for concurrent use.
type Semantics struct {
	builtin Builtin
	reg     *registry.Registry
	conv    Converter

	mu sync.Mutex // guards versions
	// versions caches the semantics of each CRD (by the registry's
	// shared, immutable CRD value) and version. A CRD whose resources
	// the registry replaced brings a new value; the old one's entries
	// are dropped when the registry no longer serves it (prune).
	versions map[versionKey]*version
}

type versionKey struct {
	crd     *apiextensionsv1.CustomResourceDefinition
	version string
}

// New returns the semantics of reg's custom resources over b, converted
// between versions by conv.
func New(reg *registry.Registry, b Builtin, conv Converter) (*Semantics, error) {
	if reg == nil || b == nil || conv == nil {
		return nil, errors.New("cannot make custom resource semantics: a registry, built-in semantics and a converter are required")
	}
	return &Semantics{builtin: b, reg: reg, conv: conv, versions: map[versionKey]*version{}}, nil
}

// Scheme is the built-in semantics' scheme.
func (s *Semantics) Scheme() *runtime.Scheme { return s.builtin.Scheme() }

// Default does to a custom resource decoded from a request what
// upstream's decoder does: metadata coercion, pruning and defaulting
// (an object of a kind the registry does not serve is left alone); other
// objects get the built-in defaults.
func (s *Semantics) Default(obj runtime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		s.builtin.Default(obj)
		return
	}
	res := s.lookupKind(u.GroupVersionKind())
	if res == nil {
		return
	}
	v, err := s.version(res.CRD, res.Version)
	if err != nil {
		return // Create and Update report it
	}
	// A value that cannot be coerced (metadata of the wrong shape) is
	// refused by validation.
	_ = v.coerce(u)
}

// UnknownFields returns the paths of the fields of a custom resource, as
// decoded from a request, that its schema does not know: what upstream's
// decoder reports for fieldValidation Strict and Warn. obj is not
// modified; other objects have none.
func (s *Semantics) UnknownFields(obj runtime.Object) []string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	res := s.lookupKind(u.GroupVersionKind())
	if res == nil {
		return nil
	}
	v, err := s.version(res.CRD, res.Version)
	if err != nil {
		return nil
	}
	paths, _ := v.prune(u.DeepCopy(), true)
	return paths
}

// Create applies upstream's create semantics to a custom resource of res
// (the served version, decoded and coerced): the name from generateName,
// PrepareForCreate (status dropped when the status subresource is
// served, generation 1), upstream's BeforeCreate validation (schema, CEL
// rules, list types, embedded resources, then ObjectMeta), warnings.
func (s *Semantics) Create(ctx context.Context, res *registry.Resource, subresource string, obj runtime.Object) (builtin.Result, error) {
	if !res.Unstructured() {
		return s.builtin.Create(ctx, res, subresource, obj)
	}
	if subresource != "" {
		return builtin.Result{}, fmt.Errorf("cannot create %s/%s: %w", res.Resource, subresource, ErrSubresource)
	}
	v, err := s.version(res.CRD, res.Version)
	if err != nil {
		return builtin.Result{}, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return builtin.Result{}, fmt.Errorf("cannot create %s: %w", res.Resource, err)
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(v.main.GenerateName(m.GetGenerateName()))
	}
	ctx = requestContext(ctx, res, subresource, "create", m)
	v.main.PrepareForCreate(ctx, obj)
	if errs := rest.ValidateCreate(ctx, obj, v.main); len(errs) > 0 {
		return builtin.Result{Errors: errs}, nil
	}
	warnings := v.main.WarningsOnCreate(ctx, obj)
	v.main.Canonicalize(obj)
	return builtin.Result{Object: obj, Warnings: warnings}, nil
}

// Update applies upstream's update semantics to obj over old (the stored
// object in the served version, not modified): the main strategy, or the
// status subresource's (only status changes), then upstream's
// BeforeUpdate rules (generation from old, bumped by the strategy; uid,
// creation and deletion kept), validation with ratcheting, warnings.
func (s *Semantics) Update(ctx context.Context, res *registry.Resource, subresource string, obj, old runtime.Object) (builtin.Result, error) {
	if !res.Unstructured() {
		return s.builtin.Update(ctx, res, subresource, obj, old)
	}
	v, err := s.version(res.CRD, res.Version)
	if err != nil {
		return builtin.Result{}, err
	}
	strat := v.main
	switch subresource {
	case "":
	case "status":
		if v.status == nil {
			return builtin.Result{}, fmt.Errorf("cannot update %s/status: %w", res.Resource, ErrSubresource)
		}
		strat = v.status
	case "scale":
		// Upstream's ScaleREST updates the parent through the main
		// strategy (whose validation checks the replicas paths).
		if v.scale == nil {
			return builtin.Result{}, fmt.Errorf("cannot update %s/scale: %w", res.Resource, ErrSubresource)
		}
	default:
		return builtin.Result{}, fmt.Errorf("cannot update %s/%s: %w", res.Resource, subresource, ErrSubresource)
	}
	old = old.DeepCopyObject()
	if u, ok := old.(*unstructured.Unstructured); ok {
		v.defaults(u)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return builtin.Result{}, fmt.Errorf("cannot update %s: %w", res.Resource, err)
	}
	oldMeta, err := meta.Accessor(old)
	if err != nil {
		return builtin.Result{}, fmt.Errorf("cannot update %s: %w", res.Resource, err)
	}
	ctx = requestContext(ctx, res, subresource, "update", m)
	m.SetGeneration(oldMeta.GetGeneration())
	strat.PrepareForUpdate(ctx, obj, old)
	builtin.KeepSystemFields(m, oldMeta)
	if errs := rest.ValidateUpdate(ctx, obj, old, strat); len(errs) > 0 {
		return builtin.Result{Errors: errs}, nil
	}
	warnings := strat.WarningsOnUpdate(ctx, obj, old)
	strat.Canonicalize(obj)
	return builtin.Result{Object: obj, Warnings: warnings}, nil
}

// version returns the semantics of crd's version name, built once.
func (s *Semantics) version(crd *apiextensionsv1.CustomResourceDefinition, name string) (*version, error) {
	k := versionKey{crd, name}
	s.mu.Lock()
	v, ok := s.versions[k]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := newVersion(crd, name) // CEL programs compile here: outside the lock
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.versions[k]; ok {
		return cur, nil
	}
	s.prune()
	s.versions[k] = v
	return v, nil
}

// prune drops the semantics of CRD values the registry no longer serves.
// Called with mu held, when a new entry is added.
func (s *Semantics) prune() {
	live := map[*apiextensionsv1.CustomResourceDefinition]bool{}
	for _, res := range s.reg.Resources() {
		if res.CRD != nil {
			live[res.CRD] = true
		}
	}
	for k := range s.versions {
		if !live[k.crd] {
			delete(s.versions, k)
		}
	}
}

// lookupKind returns the custom resource serving gvk, or nil.
func (s *Semantics) lookupKind(gvk schema.GroupVersionKind) *registry.Resource {
	for _, res := range s.reg.Resources() {
		if res.CRD != nil && res.GVK() == gvk {
			return res
		}
	}
	return nil
}

// requestContext returns ctx with what upstream's strategies read from
// it: the request's namespace and RequestInfo.
func requestContext(ctx context.Context, res *registry.Resource, subresource, verb string, m metav1Object) context.Context {
	ns := ""
	if res.Namespaced {
		ns = m.GetNamespace()
	}
	ctx = genericapirequest.WithNamespace(ctx, ns)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true,
		Verb:              verb,
		APIPrefix:         "apis",
		APIGroup:          res.Group,
		APIVersion:        res.Version,
		Namespace:         ns,
		Resource:          res.Resource,
		Subresource:       subresource,
		Name:              m.GetName(),
	})
}

type metav1Object interface {
	GetNamespace() string
	GetName() string
}

// Delete decides a delete as builtin does: custom resources have no
// upstream delete strategy beyond the registry's rules (no graceful
// deletion, no default garbage-collection policy), which builtin applies
// to every resource it has no strategy for.
func (s *Semantics) Delete(ctx context.Context, res *registry.Resource, obj runtime.Object, opts *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error) {
	return s.builtin.Delete(ctx, res, obj, opts)
}

// ReturnsDeletedObject: apiextensions-apiserver's custom resource store
// answers a delete with a Success Status, as builtin says of every
// resource whose store does not set ReturnDeletedObject.
func (s *Semantics) ReturnsDeletedObject(res *registry.Resource) bool {
	return s.builtin.ReturnsDeletedObject(res)
}
