package rest

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	autoscalingapiv1 "k8s.io/kubernetes/pkg/apis/autoscaling/v1"
	autoscalingvalidation "k8s.io/kubernetes/pkg/apis/autoscaling/validation"
	api "k8s.io/kubernetes/pkg/apis/core"
	coreapiv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/customresource"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/patch"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

var (
	scaleGVK   = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	bindingGVK = corev1.SchemeGroupVersion.WithKind("Binding")
)

// scaleOf returns the autoscaling/v1 Scale of a workload, as
// kube-apiserver's scale subresources present it.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	var spec, status int32
	var selector string
	var om metav1.ObjectMeta
	fromSelector := func(s *metav1.LabelSelector) error {
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return fmt.Errorf("cannot convert selector: %w", err)
		}
		selector = sel.String()
		return nil
	}
	replicas := func(p *int32) int32 {
		if p == nil {
			return 1
		}
		return *p
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		om, spec, status = o.ObjectMeta, replicas(o.Spec.Replicas), o.Status.Replicas
		if err := fromSelector(o.Spec.Selector); err != nil {
			return nil, err
		}
	case *appsv1.ReplicaSet:
		om, spec, status = o.ObjectMeta, replicas(o.Spec.Replicas), o.Status.Replicas
		if err := fromSelector(o.Spec.Selector); err != nil {
			return nil, err
		}
	case *appsv1.StatefulSet:
		om, spec, status = o.ObjectMeta, replicas(o.Spec.Replicas), o.Status.Replicas
		if err := fromSelector(o.Spec.Selector); err != nil {
			return nil, err
		}
	case *corev1.ReplicationController:
		om, spec, status = o.ObjectMeta, replicas(o.Spec.Replicas), o.Status.Replicas
		selector = labels.SelectorFromSet(o.Spec.Selector).String()
	default:
		return nil, fmt.Errorf("cannot scale %T", obj)
	}
	s := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name: om.Name, Namespace: om.Namespace, UID: om.UID,
			ResourceVersion: om.ResourceVersion, CreationTimestamp: om.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}
	s.APIVersion, s.Kind = scaleGVK.GroupVersion().String(), scaleGVK.Kind
	return s, nil
}

// setReplicas writes a Scale's spec.replicas into a copy of a workload.
func setReplicas(obj runtime.Object, n int32) (runtime.Object, error) {
	out := obj.DeepCopyObject()
	switch o := out.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	case *appsv1.StatefulSet:
		o.Spec.Replicas = &n
	case *corev1.ReplicationController:
		o.Spec.Replicas = &n
	default:
		return nil, fmt.Errorf("cannot scale %T", obj)
	}
	return out, nil
}

// invalidSpecReplicas marks the Scale of a custom resource without spec
// replicas, as upstream's custom resource ScaleREST does.
const invalidSpecReplicas = -2147483648 // smallest int32

// scaleOf returns the Scale of obj (of res's served version) and whether
// its spec replicas are set: a custom resource through its CRD's scale
// paths, built-ins always set.
func (h *Handler) scaleOf(res *registry.Resource, obj runtime.Object) (*autoscalingv1.Scale, bool, error) {
	if res.CRD == nil {
		s, err := scaleOf(obj)
		return s, err == nil, err
	}
	paths, u, err := crScale(res, obj)
	if err != nil {
		return nil, false, err
	}
	return paths.Of(u)
}

// setReplicas writes n into a copy of obj (of res's served version).
func (h *Handler) setReplicas(res *registry.Resource, obj runtime.Object, n int32) (runtime.Object, error) {
	if res.CRD == nil {
		return setReplicas(obj, n)
	}
	paths, u, err := crScale(res, obj)
	if err != nil {
		return nil, err
	}
	return paths.SetReplicas(u, n)
}

// crScale returns the scale paths of res, a custom resource, and obj.
func crScale(res *registry.Resource, obj runtime.Object) (*customresource.Scale, *unstructured.Unstructured, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("cannot scale %T", obj)
	}
	paths, err := customresource.ScaleOf(res.CRD, res.Version)
	if err != nil {
		return nil, nil, err
	}
	if paths == nil {
		return nil, nil, fmt.Errorf("cannot scale %s: no scale subresource", res.GVR())
	}
	return paths, u, nil
}

// writeScale answers with the Scale of obj, as stored.
func (h *Handler) writeScale(r *request, obj runtime.Object) error {
	served, err := h.toServed(r.res, obj)
	if err != nil {
		return err
	}
	s, found, err := h.scaleOf(r.res, served)
	if err != nil {
		return err
	}
	if !found {
		paths, _ := customresource.ScaleOf(r.res.CRD, r.res.Version)
		return apierror.InternalError(fmt.Errorf("the spec replicas field %q does not exist", paths.SpecReplicasPath))
	}
	body, err := h.cfg.Codec.Encode(s, r.media.Format, r.media.Pretty)
	if err != nil {
		return err
	}
	return h.send(r, 200, r.media.ContentType(), body)
}

func (h *Handler) getScale(ctx context.Context, r *request) error {
	obj, err := h.cfg.Store.Get(ctx, r.res, r.info.Namespace, r.info.Name, 0)
	if err != nil {
		return err
	}
	return h.writeScale(r, obj)
}

// applyScale validates a Scale a client sent and stores its replicas.
// The Scale goes through admission as kube-apiserver sends it: an
// UPDATE of the resource's scale subresource whose object and old
// object are autoscaling/v1 Scales.
func (h *Handler) applyScale(ctx context.Context, r *request, dry bool, pre storage.Preconditions, next func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error)) error {
	update := func(cur runtime.Object) (runtime.Object, error) {
		old, err := h.toServed(r.res, cur)
		if err != nil {
			return nil, err
		}
		curScale, found, err := h.scaleOf(r.res, old)
		if err != nil {
			return nil, err
		}
		if !found {
			curScale.Spec.Replicas = invalidSpecReplicas
		}
		sf, err := h.scaleFields(r, cur, curScale)
		if err != nil {
			return nil, err
		}
		s, err := next(curScale)
		if err != nil {
			return nil, err
		}
		if s, err = h.manageScaleFields(r, curScale, s); err != nil {
			return nil, err
		}
		if s.Spec.Replicas == invalidSpecReplicas {
			paths, _ := customresource.ScaleOf(r.res.CRD, r.res.Version)
			return nil, apierror.BadRequest(fmt.Sprintf("the spec replicas field %q cannot be empty", paths.SpecReplicasPath))
		}
		if s.Name != "" && s.Name != r.info.Name {
			return nil, apierror.BadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", s.Name, r.info.Name))
		}
		s = s.DeepCopy()
		s.APIVersion, s.Kind = scaleGVK.GroupVersion().String(), scaleGVK.Kind
		if s.Namespace == "" {
			s.Namespace = curScale.Namespace
		}
		a := h.attributes(r, admission.Update, s, curScale, dry)
		a.Kind = scaleGVK
		h.retried(ctx, r, a)
		// As upstream's scale subresources: admission sees Scales; the
		// Scale is validated, its replicas set on the parent, and the
		// parent updated through the resource's own strategy (a
		// custom resource's validates the Scale's replicas there).
		var parent runtime.Object
		if _, err := h.admit(ctx, r, a, func(obj runtime.Object) (runtime.Object, error) {
			s, ok := obj.(*autoscalingv1.Scale)
			if !ok {
				return nil, apierror.BadRequest("admission did not leave a Scale")
			}
			if r.res.CRD == nil {
				if errs, err := validateScale(s); err != nil {
					return nil, err
				} else if len(errs) > 0 {
					return nil, apierror.Invalid(autoscaling.Kind("Scale"), r.info.Name, errs)
				}
			}
			next, err := h.setReplicas(r.res, old, s.Spec.Replicas)
			if err != nil {
				return nil, err
			}
			if err := parentFields(sf, next, s); err != nil {
				return nil, err
			}
			if parent, err = h.strategyUpdate(ctx, r, "scale", next, old); err != nil {
				return nil, err
			}
			return s, nil
		}); err != nil {
			return nil, err
		}
		return h.toStored(r.res, parent)
	}
	out, err := h.updateStored(ctx, r, dry, pre, update)
	if err != nil {
		return err
	}
	return h.writeScale(r, out)
}

func (h *Handler) updateScale(ctx context.Context, r *request) error {
	dry, err := dryRun(r, "UpdateOptions")
	if err != nil {
		return err
	}
	sent, err := h.decodeBody(r, "UpdateOptions", scaleGVK, &autoscalingv1.Scale{})
	if err != nil {
		return err
	}
	s, ok := sent.(*autoscalingv1.Scale)
	if !ok {
		return apierror.BadRequest("the body is not an autoscaling/v1 Scale")
	}
	var pre storage.Preconditions
	if s.ResourceVersion != "" {
		rv, err := strconv.ParseInt(s.ResourceVersion, 10, 64)
		if err != nil {
			return invalidRV(s.ResourceVersion)
		}
		pre.ResourceVersion = rv
	}
	return h.applyScale(ctx, r, dry, pre, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return s, nil })
}

func (h *Handler) patchScale(ctx context.Context, r *request, dry bool, pt types.PatchType, body []byte) error {
	return h.applyScale(ctx, r, dry, storage.Preconditions{}, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		curJSON, err := h.cfg.StorageCodec.EncodeJSON(cur)
		if err != nil {
			return nil, err
		}
		patched, err := patch.Apply(pt, curJSON, body, &autoscalingv1.Scale{})
		if err != nil {
			return nil, patchError(err)
		}
		obj, _, err := h.cfg.Codec.Decode(patched, negotiate.JSON, negotiate.Ignore, scaleGVK, &autoscalingv1.Scale{})
		if err != nil {
			return nil, err
		}
		s, ok := obj.(*autoscalingv1.Scale)
		if !ok {
			return nil, apierror.BadRequest("the patched object is not a Scale")
		}
		if s.ResourceVersion != "" && s.ResourceVersion != cur.ResourceVersion {
			return nil, fmt.Errorf("scale resourceVersion %s is not the current %s: %w", s.ResourceVersion, cur.ResourceVersion, storage.ErrConflict)
		}
		return s, nil
	})
}

// bind assigns a pod to a node (pods/binding, or the bindings resource),
// as kube-apiserver's BindingREST does: only an unassigned, undeleted pod.
func (h *Handler) bind(ctx context.Context, r *request) error {
	sent, err := h.decodeBody(r, "CreateOptions", bindingGVK, &corev1.Binding{})
	if err != nil {
		return err
	}
	b, ok := sent.(*corev1.Binding)
	if !ok {
		return apierror.BadRequest("the body is not a v1 Binding")
	}
	name := r.info.Name
	if r.res.Resource == "bindings" {
		name = b.Name
	} else if b.Name != "" && b.Name != name {
		return apierror.BadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", b.Name, name))
	}
	if b.Namespace != "" && b.Namespace != r.info.Namespace {
		return apierror.BadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	pods, ok := h.cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
	if !ok {
		return notFoundPath()
	}
	dry, err := dryRun(r, "CreateOptions")
	if err != nil {
		return err
	}
	if b.Namespace == "" {
		b.Namespace = r.info.Namespace
	}
	// Admission sees a CREATE of the Binding, kind v1 Binding, on
	// pods/binding (or bindings), as kube-apiserver sends it.
	a := h.attributes(r, admission.Create, b, nil, dry)
	a.Kind, a.Name = bindingGVK, name
	obj, err := h.admit(ctx, r, a, func(obj runtime.Object) (runtime.Object, error) {
		nb, ok := obj.(*corev1.Binding)
		if !ok {
			return nil, apierror.BadRequest("admission did not leave a Binding")
		}
		if errs, err := validateBinding(nb); err != nil {
			return nil, err
		} else if len(errs) > 0 {
			return nil, apierror.Invalid(bindingGVK.GroupKind(), name, errs)
		}
		return nb, nil
	})
	if err != nil {
		return err
	}
	b = obj.(*corev1.Binding)
	if dry {
		return h.bound(r)
	}
	_, err = h.cfg.Store.Update(ctx, pods, r.info.Namespace, name, storage.Preconditions{UID: uidOf(b)}, func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.DeepCopyObject().(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host: %w", name, storage.ErrConflict)
		}
		if pod.Spec.NodeName != "" {
			return nil, fmt.Errorf("pod %s is already assigned to node %q: %w", name, pod.Spec.NodeName, storage.ErrConflict)
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		})
		pod.ResourceVersion = ""
		return pod, nil
	})
	h.finish(ctx, a, nil, err)
	if err != nil {
		return err
	}
	return h.bound(r)
}

// validateScale is upstream's validation of a Scale sent to a scale
// subresource (on its internal type).
func validateScale(s *autoscalingv1.Scale) (field.ErrorList, error) {
	var internal autoscaling.Scale
	if err := autoscalingapiv1.Convert_v1_Scale_To_autoscaling_Scale(s, &internal, nil); err != nil {
		return nil, fmt.Errorf("cannot convert the Scale: %w", err)
	}
	return autoscalingvalidation.ValidateScale(&internal), nil
}

// validateBinding is upstream's validation of a pod Binding (on its
// internal type), as its binding REST runs it.
func validateBinding(b *corev1.Binding) (field.ErrorList, error) {
	var internal api.Binding
	if err := coreapiv1.Convert_v1_Binding_To_core_Binding(b, &internal, nil); err != nil {
		return nil, fmt.Errorf("cannot convert the Binding: %w", err)
	}
	return corevalidation.ValidatePodBinding(&internal), nil
}

// bound answers a binding: kube-apiserver's 201 Success Status.
func (h *Handler) bound(r *request) error {
	st := apierror.Success(201)
	body, err := h.cfg.Codec.Encode(st, r.media.Format, r.media.Pretty)
	if err != nil {
		return err
	}
	return h.send(r, 201, r.media.ContentType(), body)
}

func uidOf(b *corev1.Binding) string {
	if b.UID != "" {
		return string(b.UID)
	}
	return ""
}
