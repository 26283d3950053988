package devcluster_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Field selectors take upstream's labels: events.k8s.io Events select on
// regarding.* (the core Event's involvedObject.*), ClusterTrustBundles on
// spec.signerName (kube-controller-manager's informer does), and apps/v1
// ReplicaSets on nothing but the name and namespace.
func TestFieldLabels(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ns := uniqueNS("fields")
	ensureNamespace(t, cs, ns)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name}, EventTime: metav1.NowMicro(),
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-" + name},
			Reason:    "Test", Action: "Testing", Type: corev1.EventTypeNormal,
			ReportingController: "kgate.test/" + name, ReportingInstance: "i",
		}
		if _, err := cs.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for sel, want := range map[string]string{
		"regarding.name=pod-b":                     "b",
		"reportingController=kgate.test/a":         "a",
		"regarding.kind=Pod,regarding.name!=pod-b": "a",
	} {
		list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Errorf("events.k8s.io list %q: %v", sel, err)
			continue
		}
		if len(list.Items) != 1 || list.Items[0].Name != want {
			t.Errorf("events.k8s.io list %q: %d items, want %s alone", sel, len(list.Items), want)
		}
	}
	// The core names are core's: upstream's events.k8s.io takes none.
	if _, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pod-b"}); !apierrors.IsBadRequest(err) {
		t.Errorf("events.k8s.io list on involvedObject.name: %v, want 400 BadRequest", err)
	}
	core, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pod-b"})
	if err != nil || len(core.Items) != 1 {
		t.Errorf("core list on involvedObject.name: %v, %v", core, err)
	}

	if _, err := cs.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/signer"}); err != nil {
		t.Errorf("ClusterTrustBundles on spec.signerName: %v", err)
	}
	if _, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.replicas=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("ReplicaSets on status.replicas: %v, want 400 BadRequest as upstream", err)
	}
	if _, err := cs.CoreV1().ReplicationControllers(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.replicas=1"}); err != nil {
		t.Errorf("ReplicationControllers on status.replicas: %v", err)
	}
}
