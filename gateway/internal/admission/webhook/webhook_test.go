package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
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

type allowOnly struct{ verb string }

func (a allowOnly) Authorize(_ context.Context, at authorizer.Attributes) (authorizer.Decision, string, error) {
	if at.GetVerb() == a.verb {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func TestMatchConditions(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv, ca := server(t, func(string, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		mu.Lock()
		calls++
		mu.Unlock()
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "called"}}
	})
	u := srv.URL + "/v"
	none := admissionregistrationv1.SideEffectClassNone
	vwc := func(fp admissionregistrationv1.FailurePolicyType, conds ...string) *admissionregistrationv1.ValidatingWebhookConfiguration {
		w := admissionregistrationv1.ValidatingWebhook{
			Name: "v.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}, SideEffects: &none,
			Rules: mutatingConfig(srv, ca, "/x").Webhooks[0].Rules, FailurePolicy: &fp,
		}
		for i, c := range conds {
			w.MatchConditions = append(w.MatchConditions, admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("c%d", i), Expression: c})
		}
		return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v", ResourceVersion: strings.Join(conds, ";")},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{w}}
	}
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	f := func(c *admissionregistrationv1.ValidatingWebhookConfiguration, name string, wantCalled bool, wantErr string) {
		t.Helper()
		p, err := New(Config{Validating: list{c}, Mutating: list{}, Namespaces: noLabels{}, Scheme: clientgoscheme.Scheme,
			Logger: slog.New(slog.DiscardHandler), Authorizer: allowOnly{"get"}})
		if err != nil {
			t.Fatal(err)
		}
		calls = 0
		a := &admission.Attributes{Resource: pods, Operation: admission.Create, Namespace: "ns", Name: name,
			Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}}
		err = p.Validating().Validate(context.Background(), a)
		if (calls > 0) != wantCalled {
			t.Errorf("%v on %s: called = %d, want %v", c.Webhooks[0].MatchConditions, name, calls, wantCalled)
		}
		switch {
		case wantErr == "" && err != nil && !strings.Contains(err.Error(), "called"):
			t.Errorf("%v on %s: err = %v", c.Webhooks[0].MatchConditions, name, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%v on %s: err = %v, want %q", c.Webhooks[0].MatchConditions, name, err, wantErr)
		}
	}
	prefix := "object.metadata.name.startsWith('hook-')"
	f(vwc(fail, prefix), "hook-x", true, "")
	f(vwc(fail, prefix), "other-y", false, "")
	f(vwc(fail, prefix, "request.operation == 'CREATE'", "oldObject == null"), "hook-x", true, "")
	f(vwc(fail, prefix, "request.operation == 'UPDATE'"), "hook-x", false, "")
	// authorizer: the test authorizer allows only "get".
	f(vwc(fail, "authorizer.group('').resource('pods').namespace('ns').check('get').allowed()"), "a", true, "")
	f(vwc(fail, "authorizer.requestResource.check('create').allowed()"), "a", false, "")
	// An evaluation error: Fail rejects with 403 without calling, Ignore
	// skips the webhook; a false condition wins over an error.
	broken := "object.metadata.nope == 'x'"
	f(vwc(fail, broken), "a", false, `pods "a" is forbidden: matchCondition "c0"`)
	f(vwc(ignore, broken), "a", false, "")
	f(vwc(fail, broken, "false"), "a", false, "")
	// An expression that does not compile is an error of the same kind,
	// and crashes nothing.
	f(vwc(fail, "object.metadata.name +"), "a", false, "compilation failed")
	f(vwc(ignore, "object.metadata.name +"), "a", false, "")
	f(vwc(fail, "'not a bool'"), "a", false, "must evaluate to bool")
}
