package devcluster_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage/storagetest"
)

// sarWebhook is a SubjectAccessReview service: webhook-alice may list
// configmaps in namespace "a"; namespace "c" is denied outright; anything
// else gets no opinion. It records the reviews it answers.
type sarWebhook struct {
	srv   *httptest.Server
	token string

	mu  sync.Mutex // guards got
	got []authorizationv1.SubjectAccessReviewSpec
}

func newSARWebhook(t *testing.T) *sarWebhook {
	w := &sarWebhook{token: "gateway-to-webhook"}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/authorize" || r.Header.Get("Authorization") != "Bearer "+w.token {
			http.Error(rw, "who are you", http.StatusUnauthorized)
			return
		}
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil || sar.APIVersion != "authorization.k8s.io/v1" || sar.Kind != "SubjectAccessReview" {
			http.Error(rw, "not a SubjectAccessReview", http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.got = append(w.got, sar.Spec)
		w.mu.Unlock()
		ra := sar.Spec.ResourceAttributes
		var st authorizationv1.SubjectAccessReviewStatus
		switch {
		case sar.Spec.User != "webhook-alice" || ra == nil:
		case ra.Namespace == "c":
			st.Denied, st.Reason = true, "namespace c is closed"
		case ra.Namespace == "a" && ra.Verb == "list" && ra.Group == "" && ra.Resource == "configmaps" && ra.Subresource == "":
			st.Allowed, st.Reason = true, "alice lists a"
		}
		sar.Status = st
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(&sar)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// kubeconfig writes the gateway's kubeconfig for the webhook: its
// certificate as the CA, a bearer token as the gateway's credentials.
func (w *sarWebhook) kubeconfig(t *testing.T, dir string) string {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"authz": {Server: w.srv.URL + "/authorize", CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"gateway": {Token: w.token}},
		Contexts:       map[string]*clientcmdapi.Context{"webhook": {Cluster: "authz", AuthInfo: "gateway"}},
		CurrentContext: "webhook",
	}
	file := filepath.Join(dir, "authz-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

func (w *sarWebhook) reviews() []authorizationv1.SubjectAccessReviewSpec {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// TestAuthorizationWebhook runs kgate dev with --authorization-mode
// RBAC,Webhook: the webhook's allow lets a user RBAC knows nothing about
// in, its no opinion and its deny are kube-apiserver's 403, an RBAC user
// is unaffected, access reviews carry the webhook's answers, the rules
// review is incomplete, and allows stay cached when the webhook goes.
func TestAuthorizationWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	wh := newSARWebhook(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("tok-walice,webhook-alice,uid-walice,\"webhook-team\"\ntok-rbob,rbac-bob,uid-rbob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: filepath.Join(dir, "data"), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		TokenAuthFile: tokens, AuthorizationModes: []string{"RBAC", "Webhook"},
		AuthorizationWebhook: gateway.AuthorizationWebhookConfig{ConfigFile: wh.kubeconfig(t, dir)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	waitRBAC(t, c)
	admin := clientset(t, c, false, nil)
	for _, ns := range []string{"a", "b", "c"} {
		ensureNamespace(t, admin, ns)
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{"app": "web"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	alice := tokenClient(t, c, "tok-walice")
	list, err := alice.CoreV1().ConfigMaps("a").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("alice lists configmaps in a: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "cm" {
		t.Errorf("alice's list: %+v", list.Items)
	}
	// The review the webhook got: alice as the token file has her, the
	// request's attributes and its label selector.
	var seen *authorizationv1.SubjectAccessReviewSpec
	for _, s := range wh.reviews() {
		if s.User == "webhook-alice" && s.ResourceAttributes != nil && s.ResourceAttributes.Namespace == "a" {
			seen = &s
		}
	}
	if seen == nil {
		t.Fatalf("the webhook was not asked about alice in a: %+v", wh.reviews())
	}
	ra := seen.ResourceAttributes
	if seen.UID != "uid-walice" || !slices.Equal(seen.Groups, []string{"webhook-team", "system:authenticated"}) ||
		ra.Verb != "list" || ra.Version != "v1" || ra.Resource != "configmaps" || ra.Group != "" || ra.Name != "" ||
		ra.LabelSelector == nil || len(ra.LabelSelector.Requirements) != 1 || ra.LabelSelector.Requirements[0].Key != "app" {
		t.Errorf("review for alice: %+v %+v", seen, ra)
	}

	_, err = alice.CoreV1().ConfigMaps("b").List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`configmaps is forbidden: User "webhook-alice" cannot list resource "configmaps" in API group "" in the namespace "b"`)
	_, err = alice.CoreV1().ConfigMaps("c").List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`configmaps is forbidden: User "webhook-alice" cannot list resource "configmaps" in API group "" in the namespace "c": namespace c is closed`)
	_, err = alice.CoreV1().ConfigMaps("a").Get(ctx, "cm", metav1.GetOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`configmaps "cm" is forbidden: User "webhook-alice" cannot get resource "configmaps" in API group "" in the namespace "a"`)

	// An RBAC user is decided by RBAC, before the webhook.
	bob := tokenClient(t, c, "tok-rbob")
	bindRole(t, admin, "b", "bob-view", "ClusterRole", "view", userSubject("rbac-bob"))
	storagetest.Eventually(t, 15*time.Second, "bob lists configmaps in b once bound to view", func() error {
		_, err := bob.CoreV1().ConfigMaps("b").List(ctx, metav1.ListOptions{})
		return err
	})
	before := len(wh.reviews())
	if _, err := bob.CoreV1().ConfigMaps("b").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
		t.Errorf("bob gets a configmap in b: %v", err)
	}
	if n := len(wh.reviews()); n != before {
		t.Errorf("the webhook was asked about a request RBAC allows: %+v", wh.reviews()[before:])
	}

	// kubectl auth can-i: the chain answers, the webhook's deny included.
	can := func(cs kubernetes.Interface, verb, ns string) authorizationv1.SubjectAccessReviewStatus {
		t.Helper()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Resource: "configmaps", Namespace: ns}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	if st := can(alice, "list", "a"); !st.Allowed || st.Denied || st.Reason != "alice lists a" {
		t.Errorf("can-i list configmaps -n a: %+v", st)
	}
	if st := can(alice, "list", "b"); st.Allowed || st.Denied {
		t.Errorf("can-i list configmaps -n b: %+v", st)
	}
	if st := can(alice, "list", "c"); st.Allowed || !st.Denied || st.Reason != "namespace c is closed" {
		t.Errorf("can-i list configmaps -n c: %+v", st)
	}
	if st := can(alice, "delete", "a"); st.Allowed {
		t.Errorf("can-i delete configmaps -n a: %+v", st)
	}
	if st := can(bob, "list", "b"); !st.Allowed {
		t.Errorf("bob can-i list configmaps -n b: %+v", st)
	}

	// kubectl auth can-i --list: RBAC's rules, incomplete.
	rules, err := alice.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rules.Status.Incomplete || !strings.Contains(rules.Status.EvaluationError, "webhook authorizer does not support user rule resolution") ||
		len(rules.Status.ResourceRules) == 0 {
		t.Errorf("rules review under Webhook: %+v", rules.Status)
	}

	// Calls are counted; with the webhook gone the cached allow still
	// holds, anything new that RBAC does not allow is kube-apiserver's
	// 500 (no authorizer could decide), and an access review says why.
	if n := webhookCalls(t, c, "200"); n == 0 {
		t.Error("no webhook calls counted")
	}
	wh.srv.Close()
	if _, err := alice.CoreV1().ConfigMaps("a").List(ctx, metav1.ListOptions{LabelSelector: "app=web"}); err != nil {
		t.Errorf("cached allow with the webhook gone: %v", err)
	}
	_, err = alice.CoreV1().ConfigMaps("a").List(ctx, metav1.ListOptions{LabelSelector: "app=db"}) // another request
	checkAPIError(t, err, http.StatusInternalServerError, metav1.StatusReasonInternalError, "")
	if err == nil || !strings.Contains(err.Error(), "cannot authorize the request: authorization webhook failed") {
		t.Errorf("list with the webhook gone: %v", err)
	}
	_, err = alice.CoreV1().ConfigMaps("a").Watch(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusInternalServerError, metav1.StatusReasonInternalError, "")
	ssar, err := alice.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "a", Verb: "delete", Resource: "never-asked-before"}},
	}, metav1.CreateOptions{})
	if err != nil || ssar.Status.Allowed || !strings.Contains(ssar.Status.EvaluationError, "authorization webhook failed") {
		t.Errorf("access review with the webhook gone: %+v, %v; want not allowed with an evaluation error", ssar, err)
	}
	if n := webhookCalls(t, c, "<error>"); n == 0 {
		t.Error("no failed webhook calls counted")
	}
}

// webhookCalls sums kgate_gateway_authorization_webhook_requests_total
// for code over the gateways.
func webhookCalls(t *testing.T, c *devcluster.Cluster, code string) float64 {
	t.Helper()
	mfs, err := c.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "kgate_gateway_authorization_webhook_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestAuthorizationWebhookConfig checks the gateway's errors for webhook
// options that do not fit together.
func TestAuthorizationWebhookConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	dir := t.TempDir()
	kubeconfig := newSARWebhook(t).kubeconfig(t, dir)
	cases := []struct {
		modes []string
		wh    gateway.AuthorizationWebhookConfig
		want  string
	}{
		{[]string{"RBAC", "Webhook"}, gateway.AuthorizationWebhookConfig{},
			"cannot make gateway: authorization mode Webhook needs an authorization webhook config file"},
		{[]string{"RBAC"}, gateway.AuthorizationWebhookConfig{ConfigFile: kubeconfig},
			"cannot make gateway: authorization webhook options need Webhook in the authorization modes"},
		{[]string{"Webhook"}, gateway.AuthorizationWebhookConfig{ConfigFile: kubeconfig, Version: "v2"},
			`cannot make gateway: authorization webhook: unsupported version "v2"`},
		{[]string{"Webhook"}, gateway.AuthorizationWebhookConfig{ConfigFile: filepath.Join(dir, "missing")},
			"cannot make gateway: authorization webhook: cannot load"},
	}
	for i, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cl, err := startDev(ctx, devcluster.Config{
			DataDir: filepath.Join(dir, strconv.Itoa(i)), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
			AuthorizationModes: c.modes, AuthorizationWebhook: c.wh,
		})
		cancel()
		if err == nil {
			cl.Close()
			t.Errorf("%v %+v: started", c.modes, c.wh)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %+v: %v, want %q", c.modes, c.wh, err, c.want)
		}
	}
}
