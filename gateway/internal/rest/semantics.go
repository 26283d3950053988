package rest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Semantics is kube-apiserver's own write semantics of the built-in
// resources (builtin.Semantics): decode-time defaulting, and the registry
// strategy of a create or an update (name generation, PrepareForCreate
// and PrepareForUpdate, validation, warnings, canonicalization).
type Semantics interface {
	// Scheme holds upstream's internal types and conversions (for the
	// table printers).
	Scheme() *runtime.Scheme
	Default(obj runtime.Object)
	Create(ctx context.Context, res *registry.Resource, subresource string, obj runtime.Object) (builtin.Result, error)
	Update(ctx context.Context, res *registry.Resource, subresource string, obj, old runtime.Object) (builtin.Result, error)
	// Delete decides what a delete does to the current state of an
	// object (rest.BeforeDelete, graceful deletion, finalizers).
	Delete(ctx context.Context, res *registry.Resource, obj runtime.Object, opts *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error)
	// ReturnsDeletedObject: a delete answers with the object rather
	// than a Success Status.
	ReturnsDeletedObject(res *registry.Resource) bool
}

// defaulted applies upstream's decode-time defaults to obj, a served
// object as decoded from a request, as kube-apiserver's decoder does.
// Objects of resources upstream has no strategy for (added at run time)
// have no defaults.
func (h *Handler) defaulted(obj runtime.Object) {
	h.cfg.Semantics.Default(obj)
}

// unknownFields is implemented by semantics that prune objects to a
// schema (custom resources, customresource.Semantics).
type unknownFields interface {
	UnknownFields(obj runtime.Object) []string
}

// checkUnknownFields applies fieldValidation to the fields of obj, as
// decoded from a request, that its schema does not know, as upstream's
// decoder of custom resources reports them: Strict is a 400 with
// upstream's strict decoding error, Warn a Warning header per field;
// the fields are pruned either way.
func (h *Handler) checkUnknownFields(r *request, fv negotiate.FieldValidation, obj runtime.Object) error {
	uf, ok := h.cfg.Semantics.(unknownFields)
	if !ok || fv == negotiate.Ignore {
		return nil
	}
	paths := uf.UnknownFields(obj)
	if len(paths) == 0 {
		return nil
	}
	errs := make([]error, len(paths))
	for i, p := range paths {
		errs[i] = fmt.Errorf("unknown field %q", p)
	}
	if fv == negotiate.Warn {
		for _, e := range errs {
			addWarning(r, e.Error())
		}
		return nil
	}
	gvk := r.res.GVK()
	return apierror.BadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, runtime.NewStrictDecodingError(errs)))
}

// prepareCreate runs the strategy of r's resource over obj, a served
// object after mutating admission: metadata.name from generateName,
// PrepareForCreate, validation (422 with upstream's causes), warnings
// (Warning headers) and canonicalization. It returns the object to store.
func (h *Handler) prepareCreate(ctx context.Context, r *request, obj runtime.Object) (runtime.Object, error) {
	admitted := obj.DeepCopyObject()
	res, err := h.cfg.Semantics.Create(ctx, r.res, "", obj)
	if errors.Is(err, builtin.ErrUnknown) {
		res, err = genericCreate(r.res, obj)
	}
	if err != nil {
		return nil, err
	}
	out, err := h.result(r, res, obj)
	if err != nil {
		return nil, err
	}
	keepQuotaStatus("", admitted, out)
	return out, nil
}

// strategyUpdate runs the strategy of r's resource and subresource over
// obj, the served object after mutating admission, and old, the stored
// one in its served form: upstream's rest.BeforeUpdate.
func (h *Handler) strategyUpdate(ctx context.Context, r *request, subresource string, obj, old runtime.Object) (runtime.Object, error) {
	res, err := h.cfg.Semantics.Update(ctx, r.res, subresource, obj, old)
	if errors.Is(err, builtin.ErrUnknown) {
		res, err = genericUpdate(r.res, subresource, obj, old)
	}
	if err != nil {
		return nil, err
	}
	out, err := h.result(r, res, obj)
	if err != nil {
		return nil, err
	}
	keepQuotaStatus(subresource, obj, out)
	return out, nil
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
// name from generateName (upstream's simple name generator), generation 1
// (the custom resource strategy's PrepareForCreate) and ObjectMeta
// validation with DNS subdomain names.
func genericCreate(res *registry.Resource, obj runtime.Object) (builtin.Result, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return builtin.Result{}, err
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(names.SimpleNameGenerator.GenerateName(m.GetGenerateName()))
	}
	m.SetGeneration(1)
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if len(errs) > 0 {
		return builtin.Result{Errors: errs}, nil
	}
	return builtin.Result{Object: obj}, nil
}

// genericUpdate is genericCreate's update: the generation rule of
// upstream's custom resource strategy, ObjectMeta validation and
// upstream's rules for metadata changes.
func genericUpdate(res *registry.Resource, subresource string, obj, old runtime.Object) (builtin.Result, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return builtin.Result{}, err
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return builtin.Result{}, err
	}
	gen, err := genericGeneration(res, subresource, obj, old)
	if err != nil {
		return builtin.Result{}, err
	}
	m.SetGeneration(gen)
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))...)
	if len(errs) > 0 {
		return builtin.Result{Errors: errs}, nil
	}
	return builtin.Result{Object: obj}, nil
}

// genericGeneration is the generation of obj updated over old as
// upstream's custom resource strategy computes it (rest.BeforeUpdate keeps
// the old one, PrepareForUpdate adds one when anything outside metadata
// changed, status excluded when the resource has a status subresource);
// a status update keeps it.
func genericGeneration(res *registry.Resource, subresource string, obj, old runtime.Object) (int64, error) {
	om, err := meta.Accessor(old)
	if err != nil {
		return 0, err
	}
	gen := om.GetGeneration()
	if subresource != "" {
		return gen, nil
	}
	cur, err := content(obj)
	if err != nil {
		return 0, err
	}
	prev, err := content(old)
	if err != nil {
		return 0, err
	}
	skip := func(k string) bool {
		return k == "metadata" || k == "apiVersion" || k == "kind" || (k == "status" && res.HasSubresource("status"))
	}
	strip := func(in map[string]any) map[string]any {
		out := make(map[string]any, len(in))
		for k, v := range in {
			if !skip(k) {
				out[k] = v
			}
		}
		return out
	}
	if !equality.Semantic.DeepEqual(strip(cur), strip(prev)) {
		gen++
	}
	return gen, nil
}

// content returns obj's fields as unstructured content.
func content(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot compare %T: %w", obj, err)
	}
	return out, nil
}

// kgate runs no resource quota controller: its ResourceQuota admission
// plugin fills a quota's status (hard from spec, used counted) as that
// controller's first sync would. Upstream's strategy drops the status a
// client sends on create and keeps the stored one on update, then the
// controller syncs. So for a quota written through the main resource,
// the strategy's rule is applied before mutating admission
// (quotaStatusBefore), and the status the plugin filled in is kept over
// the strategy's (keepQuotaStatus).

// quotaStatusBefore gives obj, a quota about to be admitted, the status
// upstream's strategy would leave it: none on create (old nil), the
// stored one on update.
func quotaStatusBefore(subresource string, obj, old runtime.Object) {
	q, ok := obj.(*corev1.ResourceQuota)
	if !ok || subresource != "" {
		return
	}
	q.Status = corev1.ResourceQuotaStatus{}
	if o, ok := old.(*corev1.ResourceQuota); ok {
		q.Status = *o.Status.DeepCopy()
	}
}

// keepQuotaStatus sets the status admission filled into admitted on
// prepared, what the strategy returned.
func keepQuotaStatus(subresource string, admitted, prepared runtime.Object) {
	a, ok1 := admitted.(*corev1.ResourceQuota)
	p, ok2 := prepared.(*corev1.ResourceQuota)
	if ok1 && ok2 && subresource == "" {
		p.Status = *a.Status.DeepCopy()
	}
}
