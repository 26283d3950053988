package lifecycle_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/lifecycle"
	"github.com/kgate/kgate/storage/registry"
)

type namespaces map[string]*corev1.Namespace

func (n namespaces) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	if name == "broken" {
		return nil, errors.New("etcd down")
	}
	ns, ok := n[name]
	if !ok {
		return nil, lifecycle.ErrNotFound
	}
	return ns, nil
}

func TestAdmit(t *testing.T) {
	now := metav1.Now()
	p := lifecycle.Plugin{Namespaces: namespaces{
		"live":        {ObjectMeta: metav1.ObjectMeta{Name: "live"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		"terminating": {ObjectMeta: metav1.ObjectMeta{Name: "terminating"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
		"deleting":    {ObjectMeta: metav1.ObjectMeta{Name: "deleting", DeletionTimestamp: &now}},
	}}
	podsRes := &registry.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}
	nsRes := &registry.Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace"}
	nodesRes := &registry.Resource{Version: "v1", Resource: "nodes", Kind: "Node"}
	for _, tc := range []struct {
		name       string
		res        *registry.Resource
		op         admission.Operation
		ns, obj    string
		wantCode   int32 // 0: admitted
		wantReason metav1.StatusReason
		wantCause  bool
	}{
		{"create in a live namespace", podsRes, admission.Create, "live", "p", 0, "", false},
		{"create in a missing namespace", podsRes, admission.Create, "gone", "p", http.StatusNotFound, metav1.StatusReasonNotFound, false},
		{"update in a missing namespace", podsRes, admission.Update, "gone", "p", http.StatusNotFound, metav1.StatusReasonNotFound, false},
		{"delete in a missing namespace", podsRes, admission.Delete, "gone", "p", 0, "", false},
		{"connect in a missing namespace", podsRes, admission.Connect, "gone", "p", 0, "", false},
		{"connect in a terminating namespace", podsRes, admission.Connect, "terminating", "p", 0, "", false},
		{"create in a terminating namespace", podsRes, admission.Create, "terminating", "p", http.StatusForbidden, metav1.StatusReasonForbidden, true},
		{"create in a namespace being deleted", podsRes, admission.Create, "deleting", "p", http.StatusForbidden, metav1.StatusReasonForbidden, true},
		{"update in a terminating namespace", podsRes, admission.Update, "terminating", "p", 0, "", false},
		{"namespace unreadable", podsRes, admission.Create, "broken", "p", http.StatusInternalServerError, metav1.StatusReasonInternalError, false},
		{"cluster-scoped resource", nodesRes, admission.Create, "", "n", 0, "", false},
		{"delete kube-system", nsRes, admission.Delete, "", "kube-system", http.StatusForbidden, metav1.StatusReasonForbidden, false},
		{"delete default", nsRes, admission.Delete, "", "default", http.StatusForbidden, metav1.StatusReasonForbidden, false},
		{"delete kube-public", nsRes, admission.Delete, "", "kube-public", http.StatusForbidden, metav1.StatusReasonForbidden, false},
		{"delete another namespace", nsRes, admission.Delete, "", "live", 0, "", false},
		{"create a namespace", nsRes, admission.Create, "", "new", 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Admit(context.Background(), &admission.Attributes{Resource: tc.res, Operation: tc.op, Namespace: tc.ns, Name: tc.obj})
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se apierrors.APIStatus
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a Status", err)
			}
			st := se.Status()
			if st.Code != tc.wantCode || st.Reason != tc.wantReason {
				t.Errorf("Status %d %s, want %d %s (%s)", st.Code, st.Reason, tc.wantCode, tc.wantReason, st.Message)
			}
			hasCause := st.Details != nil && len(st.Details.Causes) > 0 && st.Details.Causes[0].Type == corev1.NamespaceTerminatingCause
			if hasCause != tc.wantCause {
				t.Errorf("NamespaceTerminating cause %v, want %v: %+v", hasCause, tc.wantCause, st.Details)
			}
		})
	}
}
