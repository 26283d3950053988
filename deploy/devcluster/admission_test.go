package devcluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/storage/storagetest"
)

// webhookServer is a real admission webhook over HTTPS, with a CA of its
// own: /mutate adds the label "mutated", /validate denies objects
// labelled deny=true, /slow answers after two seconds.
type webhookServer struct {
	srv    *httptest.Server
	caPEM  []byte
	mu     sync.Mutex // guards dryRun and seen
	dryRun []bool     // dryRun of each review received
	seen   []string   // "path kind name" of each review received
}

func newWebhookServer(t *testing.T) *webhookServer {
	t.Helper()
	w := &webhookServer{}
	w.srv, w.caPEM = startTLSServer(t, http.HandlerFunc(w.serve))
	return w
}

// startTLSServer serves h over HTTPS with a certificate for 127.0.0.1
// from a CA of its own, returned as PEM.
func startTLSServer(t *testing.T, h http.Handler) (srv *httptest.Server, caPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

func (w *webhookServer) serve(rw http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Replicas int32 `json:"replicas"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(req.Object.Raw, &obj)
	w.mu.Lock()
	w.dryRun = append(w.dryRun, req.DryRun != nil && *req.DryRun)
	w.seen = append(w.seen, r.URL.Path+" "+req.Kind.Kind+" "+req.Name)
	w.mu.Unlock()
	switch r.URL.Path {
	case "/mutate":
		var patch string
		if obj.Metadata.Labels == nil {
			patch = `[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`
		} else {
			patch = `[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = []byte(patch), &pt
		resp.Warnings = []string{"mutated by the test webhook"}
	case "/validate":
		if obj.Metadata.Labels["deny"] == "true" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "denied by test"}
		}
	case "/max5": // a Scale with more than 5 replicas is denied
		if req.Kind.Kind != "Scale" || req.SubResource != "scale" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusBadRequest, Message: "expected a Scale of subresource scale, got " + req.Kind.Kind + "/" + req.SubResource}
		} else if obj.Spec.Replicas > 5 {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "at most 5 replicas"}
		}
	case "/slow":
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}
	review.Response = resp
	review.Request = nil
	_ = json.NewEncoder(rw).Encode(review)
}

func (w *webhookServer) dryRuns() []bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]bool(nil), w.dryRun...)
}

// calls returns how many reviews path received for kind and name.
func (w *webhookServer) calls(path, kind, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.seen {
		if s == path+" "+kind+" "+name {
			n++
		}
	}
	return n
}

func (w *webhookServer) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	u := w.srv.URL + path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: w.caPEM}
}

// admissionNamespace creates a namespace labelled for the tests' webhook
// and policy selectors, so they touch nothing else of the shared cluster.
func admissionNamespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns := uniqueNS(prefix)
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"admission-test": ns},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func configMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func nsSelector(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"admission-test": ns}}
}

var configMapRules = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}}

// warnings records the Warning headers client-go receives.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	w.msgs = append(w.msgs, text)
	w.mu.Unlock()
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

func TestAdmissionWebhooks(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	wh := newWebhookServer(t)
	ns := admissionNamespace(t, cs, "webhooks")
	none := admissionregistrationv1.SideEffectClassNone
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.kgate.test", ClientConfig: wh.clientConfig("/mutate"), Rules: configMapRules,
			NamespaceSelector: nsSelector(ns), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy: &ifNeeded,
		}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.kgate.test", ClientConfig: wh.clientConfig("/validate"), Rules: configMapRules,
			NamespaceSelector: nsSelector(ns), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ns, metav1.DeleteOptions{})
	})

	// The gateway learns of the configurations through its feed.
	n := 0
	storagetest.Eventually(t, 15*time.Second, "the mutating webhook applies", func() error {
		n++
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("probe-"+string(rune('a'+n%26))+time.Now().Format("150405.000000"), nil), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if cm.Labels["mutated"] != "yes" {
			return errNotYet
		}
		return nil
	})

	w := &warnings{}
	cfg := rest.CopyConfig(restConfig(t, c, true, nil))
	cfg.WarningHandler = w
	wcs := kubernetes.NewForConfigOrDie(cfg)
	cm, err := wcs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("labelled", map[string]string{"app": "x"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["mutated"] != "yes" || cm.Labels["app"] != "x" {
		t.Errorf("labels = %v, want mutated=yes and app=x", cm.Labels)
	}
	if !strings.Contains(w.all(), "mutated by the test webhook") {
		t.Errorf("warnings = %q, want the webhook's", w.all())
	}

	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("denied", map[string]string{"deny": "true"}), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "deny.kgate.test" denied the request: denied by test`) {
		t.Errorf("create denied: err = %v, want 403 from the webhook", err)
	}

	// A dry run reaches the webhooks with dryRun=true and stores nothing.
	before := len(wh.dryRuns())
	out, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("dry", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels["mutated"] != "yes" {
		t.Errorf("dry run labels = %v, want mutated", out.Labels)
	}
	seen := wh.dryRuns()[before:]
	if len(seen) == 0 {
		t.Fatal("the webhooks saw no dry run")
	}
	for _, d := range seen {
		if !d {
			t.Errorf("webhook saw dryRun=false on a dry run: %v", seen)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run object: err = %v, want NotFound", err)
	}

	// A webhook with side effects refuses dry runs.
	unknown := admissionregistrationv1.SideEffectClassSome
	vwc2 := vwc.DeepCopy()
	vwc2.ObjectMeta = metav1.ObjectMeta{Name: ns + "-some"}
	vwc2.Webhooks[0].Name = "some.kgate.test"
	vwc2.Webhooks[0].SideEffects = &unknown
	// Upstream's v1 validation refuses sideEffects Some on create (a
	// configuration stored from v1beta1 days can still hold it): written
	// to etcd directly, as such a stored one.
	vwc2.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}
	vwc2.UID, vwc2.CreationTimestamp = "5b0f3c1e-7d2a-4e8b-9c6d-0a1b2c3d4e5f", metav1.Now()
	raw, err := json.Marshal(vwc2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EtcdClient().Put(ctx, "/registry/validatingwebhookconfigurations/"+vwc2.Name, string(raw)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, vwc2.Name, metav1.DeleteOptions{})
	})
	storagetest.Eventually(t, 15*time.Second, "dry run refused by a webhook with side effects", func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("dry2", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsBadRequest(err) && strings.Contains(err.Error(), `admission webhook "some.kgate.test" does not support dry run`) {
			return nil
		}
		if err == nil {
			return errNotYet
		}
		return err
	})
}

func TestAdmissionWebhookMatchConditions(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	wh := newWebhookServer(t)
	ns := admissionNamespace(t, cs, "matchcond")
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "cond.kgate.test", ClientConfig: wh.clientConfig("/cond"), Rules: configMapRules,
			NamespaceSelector: nsSelector(ns), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "hooks-only", Expression: "object.metadata.name.startsWith('hook-')"},
				{Name: "admins", Expression: "authorizer.requestResource.check('create').allowed()"},
			},
		}},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	i := 0
	storagetest.Eventually(t, 15*time.Second, "the webhook is called for hook-*", func() error {
		i++
		name := "hook-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000")
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(name, nil), metav1.CreateOptions{}); err != nil {
			return err
		}
		if wh.calls("/cond", "ConfigMap", name) == 0 {
			return errNotYet
		}
		return nil
	})
	for _, tc := range []struct {
		name string
		want int
	}{{"hook-x", 1}, {"other-y", 0}} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(tc.name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := wh.calls("/cond", "ConfigMap", tc.name); got != tc.want {
			t.Errorf("calls for %s = %d, want %d", tc.name, got, tc.want)
		}
	}
}

var errNotYet = apierrors.NewServiceUnavailable("not yet")

func TestAdmissionWebhookTimeout(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	wh := newWebhookServer(t)
	none := admissionregistrationv1.SideEffectClassNone
	one := int32(1)
	for _, tc := range []struct {
		policy admissionregistrationv1.FailurePolicyType
		fails  bool
	}{{admissionregistrationv1.Ignore, false}, {admissionregistrationv1.Fail, true}} {
		ns := admissionNamespace(t, cs, "timeout-"+strings.ToLower(string(tc.policy)))
		fp := tc.policy
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ns},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "slow.kgate.test", ClientConfig: wh.clientConfig("/slow"), Rules: configMapRules, FailurePolicy: &fp,
				NamespaceSelector: nsSelector(ns), SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: &one,
			}},
		}
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ns, metav1.DeleteOptions{})
		})
		i := 0
		storagetest.Eventually(t, 15*time.Second, string(tc.policy), func() error {
			i++
			start := time.Now()
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("cm-"+string(rune('a'+i)), nil), metav1.CreateOptions{})
			if time.Since(start) < 900*time.Millisecond {
				if err != nil {
					return err
				}
				return errNotYet // the feed has not seen the webhook yet
			}
			if tc.fails {
				if apierrors.IsInternalError(err) && strings.Contains(err.Error(), `failed calling webhook "slow.kgate.test"`) {
					return nil
				}
				t.Fatalf("failurePolicy Fail: err = %v, want 500 failed calling webhook", err)
			}
			if err != nil {
				t.Fatalf("failurePolicy Ignore: err = %v, want success", err)
			}
			return nil
		})
	}
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	ns := admissionNamespace(t, cs, "vap")
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-policy"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: configMapRules[0],
			}}},
			Validations: []admissionregistrationv1.Validation{
				{Expression: "!has(object.data) || !('forbidden' in object.data)", Message: "the key forbidden is not allowed"},
				{Expression: "object.metadata.name.size() < 20", MessageExpression: "'name ' + object.metadata.name + ' is too long'"},
			},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, pol.Name, metav1.DeleteOptions{})
	})
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: pol.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector(ns)},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{})
	})
	want := "ValidatingAdmissionPolicy '" + pol.Name + "' with binding '" + b.Name + "' denied request: the key forbidden is not allowed"
	storagetest.Eventually(t, 15*time.Second, "the policy denies", func() error {
		cm := configMap("bad", nil)
		cm.Data = map[string]string{"forbidden": "x"}
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if err == nil {
			cs.CoreV1().ConfigMaps(ns).Delete(ctx, "bad", metav1.DeleteOptions{})
			return errNotYet
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want 422 %q", err, want)
		}
		return nil
	})
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("a-name-that-is-far-too-long", nil), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "denied request: name a-name-that-is-far-too-long is too long") {
		t.Errorf("messageExpression: err = %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("good", nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("allowed create: %v", err)
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

func TestValidatingAdmissionPolicyParams(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	ns := admissionNamespace(t, cs, "vap-params")
	nsMissingDeny := admissionNamespace(t, cs, "vap-nodeny")
	nsMissingAllow := admissionNamespace(t, cs, "vap-noallow")
	limits := configMap("limits", nil)
	limits.Data = map[string]string{"maxReplicas": "3"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, limits, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-policy"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.replicas <= int(params.data.maxReplicas)",
				MessageExpression: "'replicas must be at most ' + params.data.maxReplicas",
			}},
		},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, pol.Name, metav1.DeleteOptions{})
	})
	deny, allow := admissionregistrationv1.DenyAction, admissionregistrationv1.AllowAction
	bind := func(bns, param string, action admissionregistrationv1.ParameterNotFoundActionType) string {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: bns + "-binding"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: pol.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector(bns)},
				ParamRef:       &admissionregistrationv1.ParamRef{Name: param, ParameterNotFoundAction: &action},
			},
		}
		if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{})
		})
		return b.Name
	}
	// Created in this order, the last one applying means the feed has
	// them all (the Allow case passes either way otherwise).
	bind(nsMissingAllow, "limits", allow)
	b2 := bind(nsMissingDeny, "limits", deny)
	b1 := bind(ns, "limits", deny)

	// The params' limit: over it is denied with the policy's message.
	want := "ValidatingAdmissionPolicy '" + pol.Name + "' with binding '" + b1 + "' denied request: replicas must be at most 3"
	storagetest.Eventually(t, 15*time.Second, "the policy denies over the params' limit", func() error {
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("big", 10), metav1.CreateOptions{})
		if err == nil {
			cs.AppsV1().Deployments(ns).Delete(ctx, "big", metav1.DeleteOptions{})
			return errNotYet
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want 422 %q", err, want)
		}
		return nil
	})
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("small", 2), metav1.CreateOptions{}); err != nil {
		t.Errorf("within the limit: %v", err)
	}
	// The params are read live: raising the limit admits at once.
	limits.Data["maxReplicas"] = "20"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, limits, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("big", 10), metav1.CreateOptions{}); err != nil {
		t.Errorf("after raising the limit: %v", err)
	}

	// No params in the namespace: Deny rejects, Allow admits.
	wantMissing := "ValidatingAdmissionPolicy '" + pol.Name + "' with binding '" + b2 +
		"' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
	storagetest.Eventually(t, 15*time.Second, "missing params deny", func() error {
		_, err := cs.AppsV1().Deployments(nsMissingDeny).Create(ctx, deployment("d", 1), metav1.CreateOptions{})
		if err == nil {
			cs.AppsV1().Deployments(nsMissingDeny).Delete(ctx, "d", metav1.DeleteOptions{})
			return errNotYet
		}
		if !strings.Contains(err.Error(), wantMissing) {
			t.Fatalf("err = %v, want %q", err, wantMissing)
		}
		return nil
	})
	if _, err := cs.AppsV1().Deployments(nsMissingAllow).Create(ctx, deployment("d", 100), metav1.CreateOptions{}); err != nil {
		t.Errorf("missing params with Allow: %v", err)
	}
}

func TestAdmissionWebhookScale(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	wh := newWebhookServer(t)
	ns := admissionNamespace(t, cs, "scale")
	none := admissionregistrationv1.SideEffectClassNone
	rule := func(resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{resource}},
		}}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deploy.kgate.test", ClientConfig: wh.clientConfig("/deploy"), Rules: rule("deployments"),
			NamespaceSelector: nsSelector(ns), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}, {
			Name: "max5.kgate.test", ClientConfig: wh.clientConfig("/max5"), Rules: rule("deployments/scale"),
			NamespaceSelector: nsSelector(ns), SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	scaleTo := func(n int32) error {
		s, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = n
		_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
		return err
	}
	want := `admission webhook "max5.kgate.test" denied the request: at most 5 replicas`
	storagetest.Eventually(t, 15*time.Second, "the scale webhook applies", func() error {
		err := scaleTo(10)
		if err == nil {
			return errNotYet
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("scale to 10: err = %v, want 403 %q", err, want)
		}
		return nil
	})
	if err := scaleTo(3); err != nil {
		t.Fatalf("scale to 3: %v", err)
	}
	// A patch of the scale subresource is admitted the same way.
	_, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":7}}`), metav1.PatchOptions{}, "scale")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("patch scale to 7: err = %v, want 403 %q", err, want)
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *d.Spec.Replicas)
	}
	if n := wh.calls("/max5", "Scale", "web"); n < 3 {
		t.Errorf("scale webhook calls = %d, want at least 3", n)
	}
	// The webhook on "deployments" is not called for the scale
	// subresource, only for the deployment itself.
	if n := wh.calls("/deploy", "Scale", "web") + wh.calls("/deploy", "Deployment", "web"); n != 0 {
		t.Errorf("deployments webhook calls for scales = %d, want 0", n)
	}
	d.Labels = map[string]string{"touched": "yes"}
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := wh.calls("/deploy", "Deployment", "web"); n != 1 {
		t.Errorf("deployments webhook calls for an update = %d, want 1", n)
	}
	if n := wh.calls("/max5", "Deployment", "web"); n != 0 {
		t.Errorf("scale webhook calls for an update = %d, want 0", n)
	}
}

func TestNamespaceLifecycle(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	_, err := cs.CoreV1().ConfigMaps("no-such-namespace").Create(ctx, configMap("x", nil), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "no-such-namespace" not found`) {
		t.Errorf("create in a missing namespace: err = %v, want NotFound", err)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "this namespace may not be deleted") {
			t.Errorf("delete %s: err = %v, want Forbidden", ns, err)
		}
	}
	// A namespace being terminated takes no new content.
	ns := uniqueNS("terminating")
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, Finalizers: []string{"kgate.test/hold"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cur, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			cur.Finalizers = nil
			cs.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{})
		}
	})
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("x", nil), metav1.CreateOptions{})
	want := "unable to create new content in namespace " + ns + " because it is being terminated"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("create in a terminating namespace: err = %v, want Forbidden %q", err, want)
	}
}

func TestResourceQuota(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	ns := admissionNamespace(t, cs, "quota")
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("existing", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"configmaps": resource.MustParse("1")}},
	}
	q, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := func() int64 {
		t.Helper()
		cur, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := cur.Status.Used["configmaps"]
		return u.Value()
	}
	if u := used(); u != 1 {
		t.Fatalf("used after create = %d, want the existing configmap counted", u)
	}
	// Wait until the gateway's feed has the (full) quota: a dry run is
	// refused and nothing is charged meanwhile.
	storagetest.Eventually(t, 15*time.Second, "the quota applies", func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: q") {
			return nil
		}
		if err == nil {
			return errNotYet
		}
		return err
	})
	q, err = cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard["configmaps"] = resource.MustParse("3")
	if _, err := cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"second", "third"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("over", nil), metav1.CreateOptions{})
	want := "exceeded quota: q, requested: configmaps=1, used: configmaps=3, limited: configmaps=3"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("over quota: err = %v, want 403 %q", err, want)
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 || used() != 3 {
		t.Errorf("configmaps = %d, used = %d, want 3 and 3", len(list.Items), used())
	}
	// A deletion refunds; a dry run is checked but not charged.
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "existing", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := used(); u != 2 {
		t.Errorf("used after delete = %d, want 2", u)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("dry", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if u := used(); u != 2 {
		t.Errorf("used after a dry run = %d, want 2", u)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run object: err = %v, want NotFound", err)
	}
}

func TestResourceQuotaUpdates(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	ns := admissionNamespace(t, cs, "quota-update")
	for _, name := range []string{"a", "b"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}},
		}}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"services.nodeports": resource.MustParse("1")}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	toNodePort := func(name string, dry bool) error {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		svc.Spec.Type = corev1.ServiceTypeNodePort
		opts := metav1.UpdateOptions{}
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = cs.CoreV1().Services(ns).Update(ctx, svc, opts)
		return err
	}
	// The gateway learns of the quota through its feed: until then an
	// update is not charged, so a is turned NodePort until it is.
	storagetest.Eventually(t, 15*time.Second, "the quota is counted", func() error {
		cur, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := cur.Status.Used["services.nodeports"]; !ok {
			return errNotYet
		}
		return nil
	})
	storagetest.Eventually(t, 15*time.Second, "the quota applies to updates", func() error {
		if err := toNodePort("a", false); err != nil {
			return err
		}
		cur, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if u := cur.Status.Used["services.nodeports"]; u.Value() != 1 {
			// The feed did not have the quota yet: put a back and retry.
			svc, err := cs.CoreV1().Services(ns).Get(ctx, "a", metav1.GetOptions{})
			if err != nil {
				return err
			}
			svc.Spec.Type = corev1.ServiceTypeClusterIP
			for i := range svc.Spec.Ports {
				svc.Spec.Ports[i].NodePort = 0
			}
			if _, err := cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
				return err
			}
			return errNotYet
		}
		return nil
	})
	err := toNodePort("b", false)
	want := "exceeded quota: q, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("second NodePort: err = %v, want 403 %q", err, want)
	}
	if err := toNodePort("b", true); !apierrors.IsForbidden(err) {
		t.Errorf("second NodePort, dry run: err = %v, want 403", err)
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("b's type = %s, want ClusterIP", svc.Spec.Type)
	}
	cur, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := cur.Status.Used["services.nodeports"]; u.Value() != 1 {
		t.Errorf("used = %s, want 1", u.String())
	}
}

func TestLimitRanger(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ctx := context.Background()
	ns := admissionNamespace(t, cs, "limits")
	lr := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "lr"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			Max:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}},
	}
	if _, err := cs.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string, limit string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if limit != "" {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}
		}
		return p
	}
	i := 0
	storagetest.Eventually(t, 15*time.Second, "the LimitRange defaults pods", func() error {
		i++
		p, err := cs.CoreV1().Pods(ns).Create(ctx, pod("p"+string(rune('a'+i)), ""), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got := p.Spec.Containers[0].Resources
		if got.Limits.Cpu().String() != "500m" || got.Requests.Cpu().String() != "100m" {
			return errNotYet
		}
		return nil
	})
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("big", "2"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum cpu usage per Container is 1, but limit is 2") {
		t.Errorf("over max: err = %v, want Forbidden", err)
	}
}

// TestResourceQuotaRecount: with a recount interval, what admission's
// bookkeeping missed is corrected from the objects: an object written
// around the gateway is counted, usage charged for nothing is released.
func TestResourceQuotaRecount(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: filepath.Join(t.TempDir(), "data"), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		QuotaRecountInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	cs := clientset(t, c, true, nil)
	ns := admissionNamespace(t, cs, "recount")
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"configmaps": resource.MustParse("10"), "services": resource.MustParse("10")}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	used := func(n corev1.ResourceName) int64 {
		t.Helper()
		cur, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := cur.Status.Used[n]
		return u.Value()
	}
	// A ConfigMap written to etcd directly, as by a restore: not charged.
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"around","namespace":"` + ns + `","uid":"6f1c4a59-0d6e-4c37-9d3e-1b2f0c7a9e11","creationTimestamp":"2026-01-01T00:00:00Z"}}`
	if _, err := c.EtcdClient().Put(ctx, "/registry/configmaps/"+ns+"/around", cm); err != nil {
		t.Fatal(err)
	}
	// kube-root-ca.crt is not created by kgate dev: the one ConfigMap is
	// the one written around the gateway.
	usage := func(wantCMs, wantSvcs int64) func() error {
		return func() error {
			if cms, svcs := used("configmaps"), used("services"); cms != wantCMs || svcs != wantSvcs {
				return fmt.Errorf("used configmaps=%d services=%d, want %d and %d", cms, svcs, wantCMs, wantSvcs)
			}
			return nil
		}
	}
	// The recount charges it. The quota is then what a recount finds: the
	// recount writes it no more, and the status update below does not
	// race with it (a recount between its read and its write would make
	// it a conflict).
	storagetest.Eventually(t, 15*time.Second, "the recount charges the ConfigMap written around the gateway", usage(1, 0))
	// Usage charged for nothing, as a gateway dying between charge and
	// write leaves it.
	cur, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Used["services"] = resource.MustParse("3")
	stored, err := cs.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := stored.Status.Used["services"]; u.Value() != 3 {
		t.Fatalf("status update stored services=%s, want 3", u.String())
	}
	storagetest.Eventually(t, 15*time.Second, "the recount lowers the usage charged for nothing", usage(1, 0))
}
