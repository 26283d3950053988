package convert

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/registry"
)

func TestEventRoundTrip(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	var res *registry.Resource
	for _, r := range reg.Resources() {
		if r.Group == "events.k8s.io" {
			res = r
		}
	}
	now := metav1.NewTime(time.Unix(1700000000, 0))
	core := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          metav1.ObjectMeta{Name: "e", Namespace: "ns", ResourceVersion: "7"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns"},
		Reason:              "Started",
		Message:             "started container",
		Source:              corev1.EventSource{Component: "kubelet", Host: "n1"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               3,
		Type:                "Normal",
		EventTime:           metav1.NewMicroTime(now.Time),
		Series:              &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(now.Time)},
		Action:              "Start",
		Related:             &corev1.ObjectReference{Kind: "Node", Name: "n1"},
		ReportingController: "kubelet",
		ReportingInstance:   "n1",
	}
	served, err := FromStorage(res, core)
	if err != nil {
		t.Fatal(err)
	}
	ev := served.(*eventsv1.Event)
	if ev.Note != core.Message || ev.Regarding.Name != "p" || ev.DeprecatedCount != 3 || ev.Series.Count != 2 {
		t.Fatalf("bad conversion: %+v", ev)
	}
	back, err := ToStorage(res, ev)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(core, back); diff != "" {
		t.Fatalf("round trip changed the event (-want +got):\n%s", diff)
	}
}

func TestCustomResourceNone(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	beta := &registry.Resource{Group: "example.com", Version: "v1beta1", Resource: "widgets", Kind: "Widget", CRD: crd,
		StorageKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}}
	stored := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(3)},
	}}
	served, err := FromStorage(beta, stored)
	if err != nil {
		t.Fatal(err)
	}
	u := served.(*unstructured.Unstructured)
	if u.GetAPIVersion() != "example.com/v1beta1" || stored.GetAPIVersion() != "example.com/v1" {
		t.Errorf("served %s from stored %s: want v1beta1, the stored one unchanged", u.GetAPIVersion(), stored.GetAPIVersion())
	}
	back, err := ToStorage(beta, u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored.Object, back.(*unstructured.Unstructured).Object); diff != "" {
		t.Errorf("round trip (-stored +back):\n%s", diff)
	}
	other := stored.DeepCopy()
	other.SetKind("Gadget")
	if _, err := FromStorage(beta, other); err == nil {
		t.Error("converted a Gadget to a Widget")
	}
}
