package convert

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
