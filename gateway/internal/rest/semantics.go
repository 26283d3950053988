package rest

import (
	"context"
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage/registry"
)

// Semantics is kube-apiserver's own write semantics of the built-in
// resources (builtin.Semantics): decode-time defaulting, and the registry
// strategy of a create or an update (name generation, PrepareForCreate
// and PrepareForUpdate, validation, warnings, canonicalization).
type Semantics interface {
	Default(obj runtime.Object)
	Create(ctx context.Context, res *registry.Resource, subresource string, obj runtime.Object) (builtin.Result, error)
	Update(ctx context.Context, res *registry.Resource, subresource string, obj, old runtime.Object) (builtin.Result, error)
}

// defaulted applies upstream's decode-time defaults to obj, a served
// object as decoded from a request, as kube-apiserver's decoder does.
// Objects of resources upstream has no strategy for (added at run time)
// have no defaults.
func (h *Handler) defaulted(obj runtime.Object) {
	h.cfg.Semantics.Default(obj)
}

// prepareCreate runs the strategy of r's resource over obj, a served
// object after mutating admission: metadata.name from generateName,
// PrepareForCreate, validation (422 with upstream's causes), warnings
// (Warning headers) and canonicalization. It returns the object to store.
func (h *Handler) prepareCreate(ctx context.Context, r *request, obj runtime.Object) (runtime.Object, error) {
	res, err := h.cfg.Semantics.Create(ctx, r.res, "", obj)
	if errors.Is(err, builtin.ErrUnknown) {
		res, err = genericCreate(r.res, obj)
	}
	if err != nil {
		return nil, err
	}
	return h.result(r, res, obj)
}

// strategyUpdate runs the strategy of r's resource and subresource over
// obj, the served object after mutating admission, and old, the stored
// one in its served form: upstream's rest.BeforeUpdate.
func (h *Handler) strategyUpdate(ctx context.Context, r *request, subresource string, obj, old runtime.Object) (runtime.Object, error) {
	res, err := h.cfg.Semantics.Update(ctx, r.res, subresource, obj, old)
	if errors.Is(err, builtin.ErrUnknown) {
		res, err = genericUpdate(r.res, obj, old)
	}
	if err != nil {
		return nil, err
	}
	return h.result(r, res, obj)
}

// result turns a strategy's result into the object to store, or upstream's
// 422 Invalid with the field errors as causes; warnings become Warning
// headers either way.
func (h *Handler) result(r *request, res builtin.Result, sent runtime.Object) (runtime.Object, error) {
	for _, w := range res.Warnings {
		addWarning(r, w)
	}
	if len(res.Errors) > 0 {
		name := ""
		if m, err := meta.Accessor(sent); err == nil {
			name = m.GetName()
		}
		return nil, apierror.Invalid(r.res.GVK().GroupKind(), name, res.Errors)
	}
	return res.Object, nil
}

// addWarning adds one Warning header, escaped as kube-apiserver does.
func addWarning(r *request, w string) {
	if r.rc == nil {
		return
	}
	w = warningEscaper.Replace(w)
	r.rc.Response.Header.Add("Warning", `299 - "`+w+`"`)
}

var warningEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ")

// genericCreate is what upstream applies to objects of resources that have
// no strategy of their own among the built-ins (custom resources): the
// name from generateName (upstream's simple name generator) and ObjectMeta
// validation with DNS subdomain names.
func genericCreate(res *registry.Resource, obj runtime.Object) (builtin.Result, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return builtin.Result{}, err
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(names.SimpleNameGenerator.GenerateName(m.GetGenerateName()))
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if len(errs) > 0 {
		return builtin.Result{Errors: errs}, nil
	}
	return builtin.Result{Object: obj}, nil
}

// genericUpdate is genericCreate's update: ObjectMeta validation and
// upstream's rules for metadata changes.
func genericUpdate(res *registry.Resource, obj, old runtime.Object) (builtin.Result, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return builtin.Result{}, err
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return builtin.Result{}, err
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))...)
	if len(errs) > 0 {
		return builtin.Result{Errors: errs}, nil
	}
	return builtin.Result{Object: obj}, nil
}
