// Package convert converts between the kind a resource is served as and
// the kind it is stored as, where they differ: events.k8s.io/v1 Events are
// kept in etcd as core/v1 Events, as kube-apiserver keeps them; custom
// resources of a version other than the storage version are converted as
// upstream's "None" conversion strategy does (apiextensions-apiserver
// pkg/apiserver/conversion.nopConverter: only apiVersion changes).
package convert

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/registry"
)

// FromStorage converts a stored object to the served kind of res.
func FromStorage(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return customResource(o, res.GVK())
	case *corev1.Event:
		if res.Group == eventsv1.GroupName {
			return eventFromCore(o), nil
		}
		return o, nil
	}
	return nil, fmt.Errorf("cannot convert %T to %v", obj, res.GVK())
}

// ToStorage converts a served object of res to its storage kind.
func ToStorage(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return customResource(o, res.StorageGVK())
	case *eventsv1.Event:
		return eventToCore(o), nil
	case *corev1.Event:
		return o, nil
	}
	return nil, fmt.Errorf("cannot convert %T to %v", obj, res.StorageGVK())
}

// customResource converts a custom resource to gvk, a version of its
// kind, with the None strategy: rest's fallback for semantics that do not
// convert custom resources (customresource.Semantics converts by the
// CRD's strategy, None or Webhook, through crconvert).
func customResource(in *unstructured.Unstructured, gvk schema.GroupVersionKind) (runtime.Object, error) {
	if in.GroupVersionKind().GroupKind() != gvk.GroupKind() {
		return nil, fmt.Errorf("cannot convert %v to %v", in.GroupVersionKind(), gvk)
	}
	out := in.DeepCopy()
	out.SetAPIVersion(gvk.GroupVersion().String())
	return out, nil
}

func eventFromCore(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	out.APIVersion, out.Kind = eventsv1.SchemeGroupVersion.String(), "Event"
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

func eventToCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	out.APIVersion, out.Kind = "v1", "Event"
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}
