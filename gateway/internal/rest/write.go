package rest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apifieldmanager "k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"
	apirest "k8s.io/apiserver/pkg/registry/rest"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/patch"
	"github.com/kgate/kgate/storage"
)

// decodeBody decodes the request body into a new object of the served kind
// and checks its apiVersion and kind against the URL.
func (h *Handler) decodeBody(r *request, optionsKind string, gvk schema.GroupVersionKind, into runtime.Object) (runtime.Object, error) {
	format, err := negotiate.ContentType(string(r.rc.Request.Header.ContentType()))
	if err != nil {
		return nil, err
	}
	fv, err := negotiate.ParseFieldValidation(string(r.rc.QueryArgs().Peek("fieldValidation")), optionsKind)
	if err != nil {
		return nil, err
	}
	body := r.rc.PostBody()
	if len(body) == 0 {
		return nil, apierror.BadRequest("the request body is empty")
	}
	obj, warnings, err := h.cfg.Codec.Decode(body, format, fv, gvk, into)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		r.rc.Response.Header.Add("Warning", `299 - "`+w+`"`)
	}
	if err := h.checkUnknownFields(r, fv, obj); err != nil {
		return nil, err
	}
	if got := obj.GetObjectKind().GroupVersionKind(); !got.Empty() && got != gvk {
		if got.GroupVersion() != gvk.GroupVersion() {
			return nil, apierror.BadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.GroupVersion(), gvk.GroupVersion()))
		}
		return nil, apierror.BadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", got.Kind, gvk.Kind))
	}
	return obj, nil
}

// dryRun reads the dryRun parameter of a write whose options are of
// optionsKind (CreateOptions, UpdateOptions, PatchOptions): only "All" is
// known, anything else is upstream's 422 naming the options kind.
func dryRun(r *request, optionsKind string) (bool, error) {
	values := r.rc.QueryArgs().PeekMulti("dryRun")
	if len(values) == 0 {
		return false, nil
	}
	dry := make([]string, len(values))
	for i, v := range values {
		dry[i] = string(v)
	}
	if errs := metav1validation.ValidateDryRun(field.NewPath("dryRun"), dry); len(errs) > 0 {
		return false, optionsInvalid(optionsKind, errs)
	}
	return true, nil
}

// optionsInvalid is upstream's answer to invalid options: 422 Invalid of
// the options kind (group meta.k8s.io), with no name.
func optionsInvalid(optionsKind string, errs field.ErrorList) error {
	return apierror.Invalid(metav1.SchemeGroupVersion.WithKind(optionsKind).GroupKind(), "", errs)
}

// checkIdentity makes the object's namespace and name agree with the URL.
func checkIdentity(r *request, m metav1.Object, needName bool) error {
	if r.res.Namespaced {
		switch {
		case m.GetNamespace() == "":
			m.SetNamespace(r.info.Namespace)
		case m.GetNamespace() != r.info.Namespace:
			return apierror.BadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		m.SetNamespace("")
	}
	if needName && m.GetName() != r.info.Name {
		return apierror.BadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), r.info.Name))
	}
	return nil
}

func (h *Handler) newServed(r *request) (runtime.Object, error) {
	return h.cfg.Registry.New(r.res)
}

// readObject reads the object of a create or update body: the dryRun
// option, the decoded object of the served kind as kube-apiserver's
// conversion leaves it, and its metadata agreeing with the URL.
func (h *Handler) readObject(r *request, optionsKind string, needName bool) (runtime.Object, metav1.Object, bool, error) {
	dry, err := dryRun(r, optionsKind)
	if err != nil {
		return nil, nil, false, err
	}
	into, err := h.newServed(r)
	if err != nil {
		return nil, nil, false, err
	}
	obj, err := h.decodeBody(r, optionsKind, r.res.GVK(), into)
	if err != nil {
		return nil, nil, false, err
	}
	h.defaulted(obj)
	m, err := objectMeta(obj)
	if err != nil {
		return nil, nil, false, err
	}
	if err := checkIdentity(r, m, needName); err != nil {
		return nil, nil, false, err
	}
	return obj, m, dry, nil
}

func (h *Handler) create(ctx context.Context, r *request) error {
	if r.info.Subresource == "binding" || r.res.Resource == "bindings" {
		return h.bind(ctx, r)
	}
	if r.info.Subresource == "eviction" {
		return h.evict(ctx, r)
	}
	obj, m, dry, err := h.readObject(r, "CreateOptions", false)
	if err != nil {
		return err
	}
	if obj, err = h.manageFields(r, nil, obj); err != nil {
		return err
	}
	return h.createObject(ctx, r, obj, m, dry)
}

// createObject creates obj, a served object as decoded (or applied) with
// its managedFields.
func (h *Handler) createObject(ctx context.Context, r *request, obj runtime.Object, m metav1.Object, dry bool) error {
	// kube-apiserver's order: decode and default (readObject), mutating
	// admission, then its registry store: the name from generateName,
	// the strategy (prepare, validate, warn, canonicalize), validating
	// admission, etcd; a generated name taken already is generated again
	// (and the object validated again), at most generateNameAttempts
	// times.
	quotaStatusBefore("", obj, nil)
	a := h.attributes(r, admission.Create, obj, nil, dry)
	if err := h.mutate(ctx, r, a); err != nil {
		return &objectError{name: m.GetName(), err: err}
	}
	admitted := a.Object
	generate := needsName(admitted)
	// Node ports, taken before the strategy runs (upstream's
	// BeginCreate) and once for every attempt (they do not depend on the
	// name), given back unless the create succeeds.
	releasePorts, err := h.beginCreate(ctx, admitted)
	if err != nil {
		return &objectError{name: m.GetName(), err: err}
	}
	created := false
	defer func() {
		if !created || dry {
			releasePorts()
		}
	}()
	for attempt := 1; ; attempt++ {
		obj := admitted
		if generate {
			obj = admitted.DeepCopyObject()
		}
		a.Object = obj
		out, err := h.validate(ctx, r, a, func(obj runtime.Object) (runtime.Object, error) {
			// As the registry store: the uid and creation timestamp
			// first (a Job's generated selector names its uid).
			if m, err := meta.Accessor(obj); err == nil {
				apirest.FillObjectMetaSystemFields(m)
			}
			setIPFamilies(obj, defaultIPFamily)
			out, err := h.prepareCreate(ctx, r, obj)
			if err != nil {
				return nil, err
			}
			if m, err := objectMeta(out); err == nil && m.GetResourceVersion() != "" {
				// Upstream's storage refuses it (a 500 there; the
				// client's fault, so 400 here).
				return nil, apierror.BadRequest("resourceVersion should not be set on objects to be created")
			}
			return out, nil
		})
		if err != nil {
			return &objectError{name: a.Name, err: err}
		}
		if dry {
			return h.writeObject(r, 201, out)
		}
		stored, err := h.store(ctx, r, out)
		if errors.Is(err, storage.ErrTooLarge) && !r.applied {
			// As upstream's create handler: managedFields (which can be
			// large) are dropped and the write tried once more.
			if m, merr := meta.Accessor(out); merr == nil && len(m.GetManagedFields()) > 0 {
				m.SetManagedFields(nil)
				stored, err = h.store(ctx, r, out)
			}
		}
		if generate && attempt < generateNameAttempts && errors.Is(err, storage.ErrAlreadyExists) {
			h.finish(ctx, a, nil, err)
			a.Name = ""
			continue
		}
		h.finish(ctx, a, stored, err)
		if err != nil {
			return &objectError{name: a.Name, err: err}
		}
		created = true
		return h.writeObject(r, 201, stored)
	}
}

// generateNameAttempts bounds the creates of an object named from its
// generateName, as upstream's registry store's
// maxNameGenerationCreateAttempts.
const generateNameAttempts = 8

// needsName reports whether obj is named from its generateName.
func needsName(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetName() == "" && m.GetGenerateName() != ""
}

// store creates obj in etcd after allocating what it needs.
func (h *Handler) store(ctx context.Context, r *request, obj runtime.Object) (runtime.Object, error) {
	release, err := h.allocate(ctx, obj)
	if err != nil {
		return nil, err
	}
	stored, err := h.toStored(r.res, obj)
	if err != nil {
		release()
		return nil, err
	}
	out, err := h.cfg.Store.Create(ctx, r.res, stored)
	if err != nil {
		release()
		return nil, err
	}
	return out, nil
}

// prepareUpdate turns the object a client sent (of the served kind) into
// the object to store over cur (of the storage kind), as the subresource
// asks: kube-apiserver's update of its registry store. The server-set
// fields the client left out come from cur, then mutating admission, the
// strategy of the resource or subresource (rest.BeforeUpdate: prepare,
// validate, warn, canonicalize), validating admission.
func (h *Handler) prepareUpdate(ctx context.Context, r *request, dry bool, sent, cur runtime.Object) (runtime.Object, error) {
	old, err := h.toServed(r.res, cur)
	if err != nil {
		return nil, err
	}
	next, err := h.manageFields(r, old, sent.DeepCopyObject())
	if err != nil {
		return nil, err
	}
	if err := fillSystemFields(next, old); err != nil {
		return nil, err
	}
	keepAllocations(next, old)
	quotaStatusBefore(r.info.Subresource, next, old)
	a := h.attributes(r, admission.Update, next, old, dry)
	h.retried(ctx, r, a)
	out, err := h.admit(ctx, r, a, func(obj runtime.Object) (runtime.Object, error) {
		setIPFamilies(obj, defaultIPFamily)
		if err := h.beginUpdate(ctx, r, obj, old); err != nil {
			return nil, err
		}
		return h.strategyUpdate(ctx, r, r.info.Subresource, obj, old)
	})
	if err != nil {
		return nil, err
	}
	if err := h.settleUpdate(ctx, r, out, old); err != nil {
		return nil, err
	}
	// A write that changes nothing but managedFields' timestamps keeps the
	// old ones, so storage sees no change and writes nothing, as upstream's
	// update and patch handlers do.
	if out, err = apifieldmanager.IgnoreManagedFieldsTimestampsTransformer(ctx, out, old); err != nil {
		return nil, err
	}
	return h.toStored(r.res, out)
}

func (h *Handler) update(ctx context.Context, r *request) error {
	if r.info.Subresource == "scale" {
		return h.updateScale(ctx, r)
	}
	sent, m, dry, err := h.readObject(r, "UpdateOptions", true)
	if err != nil {
		return err
	}
	var pre storage.Preconditions
	if m.GetResourceVersion() != "" {
		if pre.ResourceVersion, err = strconv.ParseInt(m.GetResourceVersion(), 10, 64); err != nil || pre.ResourceVersion <= 0 {
			return apierror.Invalid(r.res.GVK().GroupKind(), m.GetName(), fieldErrors("metadata.resourceVersion", m.GetResourceVersion(), "must be a positive integer"))
		}
	}
	out, err := h.retryTooLarge(r, func() (runtime.Object, error) {
		return h.updateStored(ctx, r, dry, pre, func(cur runtime.Object) (runtime.Object, error) {
			return h.prepareUpdate(ctx, r, dry, sent, cur)
		})
	})
	if err != nil {
		return err
	}
	return h.writeObject(r, 200, out)
}

// retryTooLarge runs write, and once more without managedFields when its
// result was too large for etcd, as upstream's update and patch handlers
// do (not for apply patches, whose managedFields are the point).
func (h *Handler) retryTooLarge(r *request, write func() (runtime.Object, error)) (runtime.Object, error) {
	out, err := write()
	if errors.Is(err, storage.ErrTooLarge) && !r.applied && !r.dropManagedFields {
		r.dropManagedFields = true
		out, err = write()
	}
	return out, err
}

func (h *Handler) patch(ctx context.Context, r *request) error {
	pt, err := negotiate.PatchType(string(r.rc.Request.Header.ContentType()), !r.res.Unstructured())
	if err != nil {
		return err
	}
	if err := h.applySupported(pt); err != nil {
		return err
	}
	dry, err := dryRun(r, "PatchOptions")
	if err != nil {
		return err
	}
	fv, err := negotiate.ParseFieldValidation(string(r.rc.QueryArgs().Peek("fieldValidation")), "PatchOptions")
	if err != nil {
		return err
	}
	body := r.rc.PostBody()
	if len(body) == 0 {
		return apierror.BadRequest("the request body is empty")
	}
	o, err := readPatchOptions(r, pt, fv)
	if err != nil {
		return err
	}
	if pt == types.ApplyPatchType {
		return h.apply(ctx, r, dry, o, body)
	}
	if r.info.Subresource == "scale" {
		return h.patchScale(ctx, r, dry, pt, body)
	}
	out, err := h.retryTooLarge(r, func() (runtime.Object, error) {
		return h.updateStored(ctx, r, dry, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
			return h.applyPatch(ctx, r, dry, pt, fv, body, cur)
		})
	})
	if err != nil {
		return err
	}
	return h.writeObject(r, 200, out)
}

// applyPatch patches cur with body and prepares the result for storage.
func (h *Handler) applyPatch(ctx context.Context, r *request, dry bool, pt types.PatchType, fv negotiate.FieldValidation, body []byte, cur runtime.Object) (runtime.Object, error) {
	{
		served, err := h.toServed(r.res, cur)
		if err != nil {
			return nil, err
		}
		curJSON, err := h.cfg.StorageCodec.EncodeJSON(served)
		if err != nil {
			return nil, err
		}
		schemaObj, err := h.newServed(r)
		if err != nil {
			return nil, err
		}
		patched, err := patch.Apply(pt, curJSON, body, schemaObj)
		if err != nil {
			return nil, patchError(err)
		}
		into, err := h.newServed(r)
		if err != nil {
			return nil, err
		}
		sent, _, err := h.cfg.Codec.Decode(patched, negotiate.JSON, fv, r.res.GVK(), into)
		if err != nil {
			return nil, err
		}
		if err := h.checkUnknownFields(r, fv, sent); err != nil {
			return nil, err
		}
		h.defaulted(sent)
		if m, err := objectMeta(sent); err == nil && r.res.Namespaced && m.GetNamespace() == "" {
			m.SetNamespace(r.info.Namespace)
		}
		return h.prepareUpdate(ctx, r, dry, sent, cur)
	}
}

// fillSystemFields does what kube-apiserver's BeforeUpdate does for a
// client that sends an object without the fields the server set: the uid,
// creation timestamp and, for an unconditional update, the resourceVersion
// come from the stored object (what `kubectl replace -f` relies on).
func fillSystemFields(next, cur runtime.Object) error {
	nm, err := objectMeta(next)
	if err != nil {
		return err
	}
	cm, err := objectMeta(cur)
	if err != nil {
		return err
	}
	if nm.GetUID() == "" {
		nm.SetUID(cm.GetUID())
	}
	if t := cm.GetCreationTimestamp(); !t.IsZero() {
		nm.SetCreationTimestamp(cm.GetCreationTimestamp())
	}
	if nm.GetResourceVersion() == "" {
		nm.SetResourceVersion(cm.GetResourceVersion())
	}
	return nil
}

// patchError maps patch failures the way kube-apiserver does: a malformed
// patch is a 400, a patch that cannot be applied a 422.
func patchError(err error) error {
	if errors.Is(err, patch.ErrPatchFailed) {
		return apierror.UnprocessableEntity(err.Error())
	}
	return apierror.BadRequest(err.Error())
}

// deleteOptions reads metav1.DeleteOptions from the body and the query.
func (h *Handler) deleteOptions(r *request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if body := r.rc.PostBody(); len(body) > 0 {
		format, err := negotiate.ContentType(string(r.rc.Request.Header.ContentType()))
		if err != nil {
			return nil, err
		}
		if err := decodeOptions(body, format, opts); err != nil {
			return nil, apierror.BadRequest(err.Error())
		}
	}
	args := r.rc.QueryArgs()
	if v := args.Peek("gracePeriodSeconds"); len(v) > 0 {
		g, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", v))
		}
		opts.GracePeriodSeconds = &g
	}
	if v := args.Peek("propagationPolicy"); len(v) > 0 {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := args.Peek("orphanDependents"); len(v) > 0 {
		b, err := strconv.ParseBool(string(v))
		if err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid orphanDependents %q", v))
		}
		opts.OrphanDependents = &b
	}
	for _, v := range args.PeekMulti("dryRun") {
		opts.DryRun = append(opts.DryRun, string(v))
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, optionsInvalid("DeleteOptions", errs)
	}
	return opts, nil
}

// deleter decides, for storage, what a delete with opts does to the
// current state of r's object: upstream's rest.BeforeDelete and registry
// rules through Semantics.Delete, on the object in its served form. It
// remembers the last decision (storage asks again after a conflict).
type deleter struct {
	h      *Handler
	ctx    context.Context
	r      *request
	opts   *metav1.DeleteOptions
	action storage.DeleteAction
}

func (d *deleter) decide(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
	served, err := d.h.toServed(d.r.res, cur)
	if err != nil {
		return nil, 0, err
	}
	out, action, err := d.h.cfg.Semantics.Delete(d.ctx, d.r.res, served, d.opts)
	if err != nil {
		return nil, 0, err
	}
	d.action = action
	if action != storage.DeleteUpdate {
		return cur, action, nil
	}
	out, err = d.h.toStored(d.r.res, out)
	if err != nil {
		return nil, 0, err
	}
	return out, action, nil
}

func (h *Handler) delete(ctx context.Context, r *request) error {
	opts, err := h.deleteOptions(r)
	if err != nil {
		return err
	}
	dry := len(opts.DryRun) > 0
	d := &deleter{h: h, ctx: ctx, r: r, opts: opts}
	var a *admission.Attributes
	if dry || h.cfg.Admission != nil {
		cur, err := h.cfg.Store.Get(ctx, r.res, r.info.Namespace, r.info.Name, 0)
		if err != nil {
			return err
		}
		a = h.attributes(r, admission.Delete, nil, cur, dry)
		a.Options = opts
		if _, err := h.admit(ctx, r, a, nil); err != nil {
			return err
		}
		if dry {
			// What the delete would do, stored nowhere.
			out, action, err := d.decide(cur.DeepCopyObject())
			if err != nil {
				return err
			}
			if action == storage.DeleteUpdate {
				return h.deletePending(r, opts, out)
			}
			return h.deleted(r, cur)
		}
	}
	obj, deleted, err := h.cfg.Store.Delete(ctx, r.res, r.info.Namespace, r.info.Name, storage.Preconditions{}, d.decide)
	if deleted || err != nil {
		h.finish(ctx, a, obj, err)
	}
	if err != nil {
		return err
	}
	if deleted {
		h.releaseAllocations(obj)
	}
	if deleted || d.action == storage.DeleteKeep {
		return h.deleted(r, obj)
	}
	return h.deletePending(r, opts, obj)
}

// deleted answers a delete that removed obj (or found its graceful
// deletion pending) as upstream's registry store's finalizeDelete: the
// object for resources whose store returns it, else a Success Status
// naming it.
func (h *Handler) deleted(r *request, obj runtime.Object) error {
	if h.cfg.Semantics.ReturnsDeletedObject(r.res) {
		return h.writeObject(r, 200, obj)
	}
	m, err := objectMeta(obj)
	if err != nil {
		return err
	}
	st := apierror.Deleted(r.res.GVR().GroupResource(), m.GetName(), m.GetUID())
	body, err := h.cfg.Codec.Encode(st, r.media.Format, r.media.Pretty)
	if err != nil {
		return err
	}
	return h.send(r, 200, r.media.ContentType(), body)
}

// deletePending answers a delete that left the object (finalizers, a
// grace period) with its new state: 200, or 202 when the client asked
// for orphanDependents=false, as upstream's delete handler.
func (h *Handler) deletePending(r *request, opts *metav1.DeleteOptions, obj runtime.Object) error {
	code := 200
	//nolint:staticcheck // upstream still answers the deprecated option
	if o := opts.OrphanDependents; o != nil && !*o {
		code = 202
	}
	return h.writeObject(r, code, obj)
}

// deleteCollection deletes each object of the list that matches the
// selectors, as upstream's registry store: every object through the
// delete of one (admission, rest.BeforeDelete, finalizers), objects gone
// meanwhile skipped, and the answer the list of the objects as listed.
func (h *Handler) deleteCollection(ctx context.Context, r *request) error {
	o, err := parseListOptions(r.rc.QueryArgs(), r.res, false)
	if err != nil {
		return err
	}
	opts, err := h.deleteOptions(r)
	if err != nil {
		return err
	}
	dry := len(opts.DryRun) > 0
	var listed []runtime.Object
	var listRev int64
	lopts := storage.ListOptions{Limit: h.cfg.ListPageSize}
	for {
		page, err := h.cfg.Store.List(ctx, r.res, r.info.Namespace, lopts)
		if err != nil {
			return err
		}
		if listRev == 0 {
			listRev = page.Revision
		}
		for _, obj := range page.Items {
			ok, err := h.matches(r, obj, o.labels, o.fields)
			if err != nil || !ok {
				continue
			}
			m, _ := objectMeta(obj)
			listed = append(listed, obj)
			a := h.attributes(r, admission.Delete, nil, obj, dry)
			a.Namespace, a.Name, a.Options = m.GetNamespace(), m.GetName(), opts
			if _, err := h.admit(ctx, r, a, nil); err != nil {
				return err
			}
			if dry {
				continue
			}
			d := &deleter{h: h, ctx: ctx, r: r, opts: opts}
			out, deleted, err := h.cfg.Store.Delete(ctx, r.res, m.GetNamespace(), m.GetName(), storage.Preconditions{}, d.decide)
			if deleted || err != nil {
				h.finish(ctx, a, out, err)
			}
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if deleted {
				h.releaseAllocations(out)
			}
		}
		if page.Last == "" {
			break
		}
		lopts.Revision, lopts.After = page.Revision, page.Last
	}
	return h.writeObjectList(r, listed, listRev, "", nil)
}
