package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/storage/registry"
)

type list []runtime.Object

func (l list) List(string) []runtime.Object { return l }
func (l list) Generation() uint64           { return 0 }

type noLabels struct{}

func (noLabels) NamespaceLabels(context.Context, string) (map[string]string, error) { return nil, nil }

var pods = &registry.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}

// server answers reviews with respond and counts calls per path.
func server(t *testing.T, respond func(path string, r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) (*httptest.Server, []byte) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		json.NewDecoder(r.Body).Decode(&rev)
		resp := respond(r.URL.Path, rev.Request)
		resp.UID = rev.Request.UID
		json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: rev.TypeMeta, Response: resp})
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func mutatingConfig(srv *httptest.Server, ca []byte, paths ...string) *admissionregistrationv1.MutatingWebhookConfiguration {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"}}
	none := admissionregistrationv1.SideEffectClassNone
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	for _, p := range paths {
		u := srv.URL + p
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: strings.TrimPrefix(p, "/") + ".test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
			}},
			SideEffects: &none, ReinvocationPolicy: &ifNeeded,
		})
	}
	return c
}

func plugin(t *testing.T, m, v list) *Plugin {
	p, err := New(Config{Mutating: m, Validating: v, Namespaces: noLabels{}, Scheme: clientgoscheme.Scheme, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMutateAndReinvoke(t *testing.T) {
	calls := map[string]int{}
	jp := admissionv1.PatchTypeJSONPatch
	srv, ca := server(t, func(path string, r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		calls[path]++
		var pod corev1.Pod
		json.Unmarshal(r.Object.Raw, &pod)
		switch path {
		case "/first": // reads the label the second one adds
			if pod.Labels["second"] == "yes" && pod.Annotations["saw-second"] == "" {
				return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &jp, Patch: []byte(`[{"op":"add","path":"/metadata/annotations","value":{"saw-second":"yes"}}]`)}
			}
		case "/second":
			if pod.Labels["second"] == "" {
				return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &jp, Patch: []byte(`[{"op":"add","path":"/metadata/labels","value":{"second":"yes"}}]`), Warnings: []string{"w"}}
			}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	p := plugin(t, list{mutatingConfig(srv, ca, "/first", "/second")}, nil)
	a := &admission.Attributes{Resource: pods, Operation: admission.Create, Namespace: "ns", Name: "p",
		Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}}
	if err := p.Mutating().Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	pod := a.Object.(*corev1.Pod)
	if pod.Labels["second"] != "yes" || pod.Annotations["saw-second"] != "yes" {
		t.Errorf("pod = %v %v, want the label and the reinvoked webhook's annotation", pod.Labels, pod.Annotations)
	}
	if calls["/first"] != 2 || calls["/second"] != 1 {
		t.Errorf("calls = %v, want first twice, second once", calls)
	}
	if w := a.Warnings(); len(w) != 1 || w[0] != "w" {
		t.Errorf("warnings = %v", w)
	}
}

func TestDenyAndFailurePolicy(t *testing.T) {
	srv, ca := server(t, func(path string, r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if path == "/broken" {
			return &admissionv1.AdmissionResponse{Allowed: true, PatchType: nil, Patch: []byte("not json")}
		}
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "no"}}
	})
	u := srv.URL + "/deny"
	none := admissionregistrationv1.SideEffectClassNone
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{
		Name: "deny.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}, SideEffects: &none,
		Rules: mutatingConfig(srv, ca, "/x").Webhooks[0].Rules,
	}}}
	p := plugin(t, nil, list{v})
	a := &admission.Attributes{Resource: pods, Operation: admission.Create, Namespace: "ns", Name: "p", Object: &corev1.Pod{}}
	err := p.Validating().Validate(context.Background(), a)
	if !apierrors.IsBadRequest(err) || err.Error() != `admission webhook "deny.test" denied the request: no` {
		t.Errorf("deny: err = %v", err)
	}

	// A patch without patchType fails the call: Fail rejects, Ignore admits.
	m := mutatingConfig(srv, ca, "/broken")
	err = plugin(t, list{m}, nil).Mutating().Admit(context.Background(), a)
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "broken.test"`) {
		t.Errorf("Fail: err = %v", err)
	}
	ignore := admissionregistrationv1.Ignore
	m.Webhooks[0].FailurePolicy = &ignore
	if err := plugin(t, list{m}, nil).Mutating().Admit(context.Background(), a); err != nil {
		t.Errorf("Ignore: err = %v", err)
	}

	// Side effects and dry run.
	some := admissionregistrationv1.SideEffectClassSome
	v.Webhooks[0].SideEffects = &some
	a.DryRun = true
	err = plugin(t, nil, list{v}).Validating().Validate(context.Background(), a)
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "does not support dry run") {
		t.Errorf("dry run: err = %v", err)
	}
}
