package rest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/customresource"
	"github.com/kgate/kgate/gateway/internal/fieldmanager"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// fieldManager keeps metadata.managedFields and merges server-side apply
// patches (fieldmanager.Managers). Objects are of the kind written through
// the subresource: the served kind, or autoscaling/v1 Scale for "scale".
type fieldManager interface {
	Update(res *registry.Resource, subresource string, live, obj runtime.Object, manager string) (runtime.Object, error)
	Apply(res *registry.Resource, subresource string, live runtime.Object, patch []byte, manager string, force bool) (runtime.Object, error)
}

// managerName returns the manager of a write whose options are of
// optionsKind: the fieldManager option, checked as upstream checks it, or
// the user agent's prefix.
func managerName(r *request, optionsKind string) (string, error) {
	fm := string(r.rc.QueryArgs().Peek("fieldManager"))
	if errs := metav1validation.ValidateFieldManager(fm, field.NewPath("fieldManager")); len(errs) > 0 {
		return "", optionsInvalid(optionsKind, errs)
	}
	return fieldmanager.Name(fm, string(r.rc.UserAgent())), nil
}

// manageFields records the write's Update operation in obj's managedFields
// over live (nil for a create), as upstream's create, update and patch
// handlers do before admission. An apply has recorded its own.
func (h *Handler) manageFields(r *request, live, obj runtime.Object) (runtime.Object, error) {
	if r.dropManagedFields {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}
	if h.cfg.FieldManager == nil || r.applied {
		return obj, nil
	}
	kind := "UpdateOptions"
	switch r.info.Verb {
	case "create":
		kind = "CreateOptions"
	case "patch":
		kind = "PatchOptions"
	}
	manager, err := managerName(r, kind)
	if err != nil {
		return nil, err
	}
	return h.cfg.FieldManager.Update(r.res, r.info.Subresource, live, obj, manager)
}

// patchOptions are the options of a patch the field manager reads.
type patchOptions struct {
	manager string
	force   bool
	strict  bool // fieldValidation Strict: duplicate fields are an error
	warn    bool // fieldValidation Warn: duplicate fields are a warning
}

// readPatchOptions reads and checks the options of a patch of type pt as
// upstream's ValidatePatchOptions does: an apply needs fieldManager, force
// is for apply only, fieldManager is a short printable name.
func readPatchOptions(r *request, pt types.PatchType, fv negotiate.FieldValidation) (patchOptions, error) {
	args := r.rc.QueryArgs()
	opts := &metav1.PatchOptions{FieldManager: string(args.Peek("fieldManager"))}
	for _, v := range args.PeekMulti("dryRun") {
		opts.DryRun = append(opts.DryRun, string(v))
	}
	if v := args.Peek("force"); len(v) > 0 {
		b, err := strconv.ParseBool(string(v))
		if err != nil {
			return patchOptions{}, apierror.BadRequest(fmt.Sprintf("invalid force %q: %v", v, err))
		}
		opts.Force = &b
	}
	if errs := metav1validation.ValidatePatchOptions(opts, pt); len(errs) > 0 {
		return patchOptions{}, optionsInvalid("PatchOptions", errs)
	}
	out := patchOptions{manager: opts.FieldManager, strict: fv == negotiate.Strict, warn: fv == negotiate.Warn}
	if opts.Force != nil {
		out.force = *opts.Force
	}
	return out, nil
}

// applied merges an apply patch into live (nil: create) for the request's
// resource or subresource, as upstream's apply patcher does, and marks the
// request applied (its managedFields are recorded).
func (h *Handler) applied(r *request, o patchOptions, live runtime.Object, body []byte) (runtime.Object, error) {
	out, err := h.cfg.FieldManager.Apply(r.res, r.info.Subresource, live, body, o.manager, o.force)
	switch {
	case errors.Is(err, fieldmanager.ErrDecode):
		return nil, apierror.BadRequest("error decoding patch: " + errors.Unwrap(err).Error())
	case errors.Is(err, fieldmanager.ErrUnsupported):
		return nil, apierror.UnsupportedMediaType(patchTypesWithoutApply)
	case err != nil:
		return nil, err
	}
	if o.strict || o.warn {
		if err := fieldmanager.StrictCheck(body); err != nil {
			if o.strict {
				return nil, apierror.BadRequest("error strict decoding patch: " + err.Error())
			}
			addWarning(r, err.Error())
		}
	}
	r.applied = true
	return out, nil
}

// applySupported refuses apply patches when no field manager serves them:
// 415 with the other patch types, as upstream answers a patch type it does
// not serve.
func (h *Handler) applySupported(pt types.PatchType) error {
	if pt == types.ApplyPatchType && h.cfg.FieldManager == nil {
		return apierror.UnsupportedMediaType(patchTypesWithoutApply)
	}
	return nil
}

var patchTypesWithoutApply = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType)}

// apply serves a server-side apply (PATCH with application/apply-patch+yaml)
// of the resource or its status: the patch merged into the stored object
// by the field manager (a conflict is upstream's 409 and writes nothing),
// then the update path of every write (admission, strategy, etcd). Applying
// to an object that does not exist creates it (201), as upstream's patch
// handler does.
func (h *Handler) apply(ctx context.Context, r *request, dry bool, o patchOptions, body []byte) error {
	if r.info.Subresource == "scale" {
		return h.applyScaleApply(ctx, r, dry, o, body)
	}
	out, err := h.updateStored(ctx, r, dry, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		old, err := h.toServed(r.res, cur)
		if err != nil {
			return nil, err
		}
		sent, err := h.applied(r, o, old, body)
		if err != nil {
			return nil, err
		}
		return h.prepareUpdate(ctx, r, dry, sent, cur)
	})
	if errors.Is(err, storage.ErrNotFound) && r.info.Subresource == "" {
		return h.applyCreate(ctx, r, dry, o, body)
	}
	if err != nil {
		return err
	}
	return h.writeObject(r, 200, out)
}

// applyCreate creates the object an apply patch describes, through the
// create path (201).
func (h *Handler) applyCreate(ctx context.Context, r *request, dry bool, o patchOptions, body []byte) error {
	obj, err := h.applied(r, o, nil, body)
	if err != nil {
		return err
	}
	m, err := objectMeta(obj)
	if err != nil {
		return err
	}
	if err := checkIdentity(r, m, true); err != nil {
		return err
	}
	return h.createObject(ctx, r, obj, m, dry)
}

// scaleFields gives curScale the managedFields of cur, its parent, that
// own the replicas, as upstream's scale REST does; nil without a field
// manager.
func (h *Handler) scaleFields(r *request, cur runtime.Object, curScale *autoscalingv1.Scale) (*fieldmanager.ScaleFields, error) {
	if h.cfg.FieldManager == nil {
		return nil, nil
	}
	m, err := objectMeta(cur)
	if err != nil {
		return nil, err
	}
	var sf *fieldmanager.ScaleFields
	if r.res.CRD != nil {
		paths, err := customresource.ReplicasPaths(r.res.CRD)
		if err != nil {
			return nil, err
		}
		sf = fieldmanager.NewCustomScaleFields(r.res.GVR().GroupVersion(), paths, m.GetManagedFields())
	} else if sf, err = fieldmanager.NewScaleFields(r.res, m.GetManagedFields()); err != nil {
		return nil, err
	}
	if curScale.ManagedFields, err = sf.ToScale(); err != nil {
		return nil, err
	}
	return sf, nil
}

// manageScaleFields records the write's Update operation on the Scale s
// over curScale (see manageFields).
func (h *Handler) manageScaleFields(r *request, curScale, s *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	out, err := h.manageFields(r, curScale, s.DeepCopy())
	if err != nil {
		return nil, err
	}
	managed, ok := out.(*autoscalingv1.Scale)
	if !ok {
		return nil, fmt.Errorf("cannot manage the fields of a scale: the field manager returned %T", out)
	}
	return managed, nil
}

// parentFields folds the managedFields of the Scale s back into parent, as
// upstream's scale REST does.
func parentFields(sf *fieldmanager.ScaleFields, parent runtime.Object, s *autoscalingv1.Scale) error {
	if sf == nil {
		return nil
	}
	m, err := objectMeta(parent)
	if err != nil {
		return err
	}
	mf, err := sf.ToParent(s.ManagedFields)
	m.SetManagedFields(mf)
	return err
}

// applyScaleApply serves a server-side apply of a scale subresource: the
// Scale's fields merged by the scale's field manager, then the scale
// update path.
func (h *Handler) applyScaleApply(ctx context.Context, r *request, dry bool, o patchOptions, body []byte) error {
	return h.applyScale(ctx, r, dry, storage.Preconditions{}, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		out, err := h.applied(r, o, cur, body)
		if err != nil {
			return nil, err
		}
		s, ok := out.(*autoscalingv1.Scale)
		if !ok {
			return nil, fmt.Errorf("cannot apply a scale: the field manager returned %T", out)
		}
		return s, nil
	})
}
