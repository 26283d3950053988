// Package strategy holds what kube-apiserver's per-resource strategies do
// before a write reaches storage: reset status on create and keep it on a
// main-resource update for resources with a status subresource, take only
// the status on a status update, the namespace and pod lifecycle fields,
// and object metadata validation with each resource's name rules.
package strategy

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kgate/kgate/storage/registry"
)

// ObjectMeta returns the metadata of a typed object.
func ObjectMeta(obj runtime.Object) (*metav1.ObjectMeta, error) {
	a, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, fmt.Errorf("cannot read metadata of %T", obj)
	}
	m, ok := a.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, fmt.Errorf("cannot read metadata of %T", obj)
	}
	return m, nil
}

// PrepareForCreate clears what a client may not set on create and sets
// the fields kube-apiserver sets.
func PrepareForCreate(res *registry.Resource, obj runtime.Object) {
	if m, err := ObjectMeta(obj); err == nil {
		m.ResourceVersion = ""
		m.DeletionTimestamp = nil
		m.DeletionGracePeriodSeconds = nil
		m.UID = ""
		m.Generation = 0
		m.ManagedFields = nil
	}
	if res.HasSubresource("status") {
		resetStatus(obj)
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		if len(o.Spec.Finalizers) == 0 {
			o.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
		}
		o.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	case *corev1.Pod:
		o.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podQOS(&o.Spec)}
	}
}

// PrepareForUpdate makes a main-resource update keep the stored status of
// resources that have a status subresource.
func PrepareForUpdate(res *registry.Resource, newObj, oldObj runtime.Object) {
	if res.HasSubresource("status") {
		copyStatus(newObj, oldObj)
	}
	if n, ok := newObj.(*corev1.Namespace); ok {
		if o, ok := oldObj.(*corev1.Namespace); ok {
			n.Spec.Finalizers = o.Spec.Finalizers // changed only through /finalize
		}
	}
}

// PrepareForStatusUpdate returns the object a status update stores: the
// stored object with the status (and resourceVersion precondition) of the
// request.
func PrepareForStatusUpdate(newObj, oldObj runtime.Object) runtime.Object {
	out := oldObj.DeepCopyObject()
	copyStatus(out, newObj)
	if nm, err := ObjectMeta(newObj); err == nil {
		if om, err := ObjectMeta(out); err == nil {
			om.ResourceVersion = nm.ResourceVersion
		}
	}
	return out
}

// resetStatus sets obj.Status to its zero value.
func resetStatus(obj runtime.Object) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer {
		return
	}
	if f := v.Elem().FieldByName("Status"); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

// copyStatus sets dst.Status = src.Status for objects of the same type.
func copyStatus(dst, src runtime.Object) {
	dv, sv := reflect.ValueOf(dst), reflect.ValueOf(src)
	if dv.Kind() != reflect.Pointer || sv.Kind() != reflect.Pointer || dv.Type() != sv.Type() {
		return
	}
	df, sf := dv.Elem().FieldByName("Status"), sv.Elem().FieldByName("Status")
	if df.IsValid() && sf.IsValid() && df.CanSet() {
		df.Set(sf)
	}
}

// podQOS computes the pod's QoS class as kube-apiserver does.
func podQOS(spec *corev1.PodSpec) corev1.PodQOSClass {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	hasAny := false
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory || q.IsZero() {
				continue
			}
			hasAny = true
			add(requests, name, q)
		}
		seen := 0
		for name, q := range c.Resources.Limits {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory || q.IsZero() {
				continue
			}
			hasAny = true
			seen++
			add(limits, name, q)
		}
		if seen < 2 {
			guaranteed = false
		}
	}
	if !hasAny {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if l, ok := limits[name]; !ok || l.Cmp(req) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(limits) == 2 {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if cur, ok := list[name]; ok {
		cur.Add(q)
		list[name] = cur
		return
	}
	list[name] = q.DeepCopy()
}

// nameRule returns the name validation kube-apiserver applies to res.
func nameRule(res *registry.Resource) apivalidation.ValidateNameFunc {
	switch {
	case res.Group == "" && res.Resource == "namespaces":
		return apivalidation.NameIsDNSLabel
	case res.Group == "" && res.Resource == "services":
		return apivalidation.NameIsDNS1035Label
	case res.Group == "rbac.authorization.k8s.io":
		return path.ValidatePathSegmentName
	case res.Group == "" && res.Resource == "events", res.Group == "events.k8s.io":
		return path.ValidatePathSegmentName
	}
	return apivalidation.NameIsDNSSubdomain
}

// ValidateCreate validates the metadata of an object about to be created.
func ValidateCreate(res *registry.Resource, obj runtime.Object) field.ErrorList {
	m, err := ObjectMeta(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	return apivalidation.ValidateObjectMeta(m, res.Namespaced, nameRule(res), field.NewPath("metadata"))
}

// ValidateUpdate validates the metadata of an update against the stored
// object.
func ValidateUpdate(res *registry.Resource, newObj, oldObj runtime.Object) field.ErrorList {
	nm, err := ObjectMeta(newObj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	om, err := ObjectMeta(oldObj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apivalidation.ValidateObjectMeta(nm, res.Namespaced, nameRule(res), field.NewPath("metadata"))
	return append(errs, apivalidation.ValidateObjectMetaUpdate(nm, om, field.NewPath("metadata"))...)
}

// Normalize does what kube-apiserver's conversion to its internal types
// does to every decoded object: a Secret's stringData is merged into data
// (stringData wins) and never stored.
func Normalize(obj runtime.Object) {
	if s, ok := obj.(*corev1.Secret); ok && s.StringData != nil {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
}
