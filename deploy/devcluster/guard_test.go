package devcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage/storagetest"
)

const guardPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  nonResourceURLs: ["/readyz*"]
- level: None
  nonResourceURLs: ["/healthz*", "/livez*"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
`

const guardTokens = `tok-rate,rate-user,uid-rate
tok-watch,watch-user,uid-watch
tok-list,list-user,uid-list
`

// TestGuard runs audit, fairness and TLS reload through a real gateway
// with a cluster of its own (its limits would disturb other tests).
func TestGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	dir := t.TempDir()
	policy, tokens, auditLog := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(guardPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte(guardTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: filepath.Join(dir, "data"), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		TokenAuthFile: tokens,
		Audit:         gateway.AuditConfig{PolicyFile: policy, LogPath: auditLog},
		Limits: gateway.LimitsConfig{
			// kgate's seats for API Priority and Fairness.
			MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200,
			UserQPS: 5, UserBurst: 5,
			MaxWatchesPerUser:  2,
			ListBytesPerSecond: 2000, ListBytesBurst: 2000, ListMaxWait: 100 * time.Millisecond,
		},
		ServingTLS: gateway.ServingTLSConfig{ReloadInterval: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	waitRBAC(t, c)
	admin, err := kubernetes.NewForConfig(restConfig(t, c, true, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("audit", func(t *testing.T) { testAudit(t, c, admin, auditLog) })
	t.Run("user rate", func(t *testing.T) { testUserRate(t, c) })
	t.Run("watches per user", func(t *testing.T) { testWatchCap(t, c, admin) })
	t.Run("list bytes", func(t *testing.T) { testListBytes(t, c, admin) })
	t.Run("certificate reload", func(t *testing.T) { testCertReload(t, c) })
}

func testAudit(t *testing.T, c *devcluster.Cluster, admin kubernetes.Interface, auditLog string) {
	bg := context.Background()
	ns := "audit-ns"
	if _, err := admin.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm1"}, Data: map[string]string{"k": "audited-value"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(ns).Create(bg, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, StringData: map[string]string{"k": "secret-value"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := admin.CoreV1().ConfigMaps(ns).Watch(bg, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-w.ResultChan()
	w.Stop()
	rc := newRawClient(t, c)
	if resp, _ := rc.do(t, "GET", "/healthz", nil); resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	if resp, _ := rc.do(t, "GET", "/version", nil); resp.StatusCode != 200 {
		t.Fatalf("/version: %d", resp.StatusCode)
	}
	// Health probes need no credentials but are audited when the policy
	// says so; a single check has its own path.
	anon := newAnonymousClient(t, c)
	if resp, body := anon.do(t, "GET", "/readyz/etcd", nil); resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("/readyz/etcd: %d %s", resp.StatusCode, body)
	}
	if resp, _ := anon.do(t, "GET", "/readyz/nosuchcheck", nil); resp.StatusCode != 404 {
		t.Fatalf("/readyz/nosuchcheck: %d, want 404", resp.StatusCode)
	}
	// A request with a bad token is audited without a user.
	if resp, _ := anon.do(t, "GET", "/api/v1/namespaces/"+ns+"/pods", nil, "Authorization", "Bearer not-a-token"); resp.StatusCode != 401 {
		t.Fatalf("bad token: %d, want 401", resp.StatusCode)
	}
	// Every response carries its audit ID: the client's when it sent a
	// sane one, else a new one; the audit events carry the same.
	resp, _ := rc.do(t, "GET", "/api/v1/namespaces/"+ns+"/configmaps/cm1", nil, "Audit-ID", "client-chosen-id-1")
	if got := resp.Header.Get("Audit-Id"); got != "client-chosen-id-1" {
		t.Fatalf("Audit-Id %q, want the client's", got)
	}
	resp, _ = rc.do(t, "GET", "/api/v1/namespaces/"+ns+"/configmaps/missing", nil, "Audit-ID", "bad id\twith tab")
	generated := resp.Header.Get("Audit-Id")
	if resp.StatusCode != 404 || generated == "" || strings.ContainsAny(generated, " \t") {
		t.Fatalf("404 response: code %d Audit-Id %q", resp.StatusCode, generated)
	}
	resp, _ = rc.do(t, "GET", "/api/v1/namespaces/"+ns+"/configmaps?watch=1&timeoutSeconds=1", nil, "Audit-ID", "watch-id-1")
	if got := resp.Header.Get("Audit-Id"); got != "watch-id-1" {
		t.Fatalf("watch Audit-Id %q, want watch-id-1", got)
	}

	// find returns the events of one request, by verb and URI prefix.
	find := func(evs []auditv1.Event, verb, uri string) []auditv1.Event {
		var out []auditv1.Event
		for _, e := range evs {
			if e.Verb == verb && strings.HasPrefix(e.RequestURI, uri) {
				out = append(out, e)
			}
		}
		return out
	}
	stages := func(evs []auditv1.Event) string {
		var s []string
		for _, e := range evs {
			s = append(s, string(e.Stage))
		}
		return strings.Join(s, ",")
	}
	storagetest.Eventually(t, 15*time.Second, "audit log", func() error {
		evs, err := readAudit(auditLog)
		if err != nil {
			return err
		}
		for _, e := range evs {
			unauthenticated := e.ResponseStatus != nil && e.ResponseStatus.Code == 401
			if e.Kind != "Event" || e.APIVersion != "audit.k8s.io/v1" || e.AuditID == "" || (e.User.Username == "") != unauthenticated || len(e.SourceIPs) == 0 {
				return fmt.Errorf("incomplete event %+v", e)
			}
			if strings.HasPrefix(e.RequestURI, "/healthz") {
				return fmt.Errorf("health is audited (policy says None): %+v", e)
			}
		}
		ready := find(evs, "get", "/readyz/etcd")
		if stages(ready) != "RequestReceived,ResponseComplete" || ready[1].User.Username != "system:anonymous" || ready[1].ResponseStatus.Code != 200 {
			return fmt.Errorf("/readyz/etcd events %+v", ready)
		}
		bad := find(evs, "list", "/api/v1/namespaces/"+ns+"/pods")
		if stages(bad) != "ResponseStarted" || bad[0].ResponseStatus.Code != 401 || bad[0].User.Username != "" || bad[0].ObjectRef == nil || bad[0].ObjectRef.Resource != "pods" {
			return fmt.Errorf("unauthenticated list events %+v", bad)
		}
		if ids := find(evs, "get", "/api/v1/namespaces/"+ns+"/configmaps/cm1"); stages(ids) != "RequestReceived,ResponseComplete" || ids[0].AuditID != "client-chosen-id-1" || ids[1].AuditID != "client-chosen-id-1" {
			return fmt.Errorf("events of the request with an Audit-ID: %+v", ids)
		}
		if ids := find(evs, "get", "/api/v1/namespaces/"+ns+"/configmaps/missing"); len(ids) != 2 || string(ids[1].AuditID) != generated {
			return fmt.Errorf("events of the 404 (response Audit-Id %q): %+v", generated, ids)
		}
		if ids := find(evs, "watch", "/api/v1/namespaces/"+ns+"/configmaps?watch=1"); len(ids) == 0 || ids[0].AuditID != "watch-id-1" {
			return fmt.Errorf("events of the watch with an Audit-ID: %+v", ids)
		}
		cm := find(evs, "create", "/api/v1/namespaces/"+ns+"/configmaps")
		if stages(cm) != "RequestReceived,ResponseComplete" {
			return fmt.Errorf("configmap create stages %q", stages(cm))
		}
		done := cm[1]
		if done.Level != auditv1.LevelRequestResponse || done.ResponseStatus == nil || done.ResponseStatus.Code != 201 ||
			done.ObjectRef == nil || done.ObjectRef.Resource != "configmaps" || done.ObjectRef.Namespace != ns {
			return fmt.Errorf("configmap create event %+v", done)
		}
		if done.RequestObject == nil || !bytes.Contains(done.RequestObject.Raw, []byte("audited-value")) ||
			done.ResponseObject == nil || !bytes.Contains(done.ResponseObject.Raw, []byte(`"resourceVersion"`)) {
			return fmt.Errorf("configmap create bodies: request %v response %v", done.RequestObject, done.ResponseObject)
		}
		sec := find(evs, "create", "/api/v1/namespaces/"+ns+"/secrets")
		if stages(sec) != "RequestReceived,ResponseComplete" || sec[1].Level != auditv1.LevelMetadata ||
			sec[1].RequestObject != nil || sec[1].ResponseObject != nil || sec[1].ResponseStatus.Code != 201 {
			return fmt.Errorf("secret create events %+v", sec)
		}
		watch := find(evs, "watch", "/api/v1/namespaces/"+ns+"/configmaps?watch=true")
		if stages(watch) != "RequestReceived,ResponseStarted,ResponseComplete" {
			return fmt.Errorf("watch stages %q", stages(watch))
		}
		ver := find(evs, "get", "/version")
		if stages(ver) != "RequestReceived,ResponseComplete" || ver[1].Level != auditv1.LevelMetadata || ver[1].ObjectRef != nil {
			return fmt.Errorf("/version events %+v", ver)
		}
		return nil
	})
}

func readAudit(path string) ([]auditv1.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit line %q: %w", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// tokenRaw is a raw client for a bearer token.
func tokenRaw(t *testing.T, c *devcluster.Cluster, token string) *rawClient {
	t.Helper()
	cfg := tokenConfig(t, c, token)
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rawClient{base: strings.TrimSuffix(cfg.Host, "/"), hc: &http.Client{Transport: rt, Timeout: 30 * time.Second}}
}

func want429(t *testing.T, resp *http.Response, body []byte, what string) {
	t.Helper()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !bytes.Contains(body, []byte(`"reason":"TooManyRequests"`)) {
		t.Fatalf("%s: got %d Retry-After=%q %s, want 429 TooManyRequests with Retry-After", what, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

func testUserRate(t *testing.T, c *devcluster.Cluster) {
	rc := tokenRaw(t, c, "tok-rate")
	for i := range 5 {
		// Forbidden (no RBAC), but admitted: the burst.
		if resp, body := rc.do(t, "GET", "/api/v1/namespaces/default/configmaps", nil); resp.StatusCode != 403 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := rc.do(t, "GET", "/api/v1/namespaces/default/configmaps", nil)
	want429(t, resp, body, "over the user's rate")
	// Another user is not affected.
	if resp, body := tokenRaw(t, c, "tok-list").do(t, "GET", "/api/v1/namespaces/default/configmaps", nil); resp.StatusCode == 429 {
		t.Fatalf("another user: %d %s", resp.StatusCode, body)
	}
	// Real time is what is under test: the running gateway's per-user
	// bucket refills on the wall clock (5 a second), which no event
	// announces (fairness's own tests drive it in a synctest bubble).
	time.Sleep(time.Second)
	if resp, body := rc.do(t, "GET", "/api/v1/namespaces/default/configmaps", nil); resp.StatusCode != 403 {
		t.Fatalf("after a refill: %d %s", resp.StatusCode, body)
	}
}

func testWatchCap(t *testing.T, c *devcluster.Cluster, admin kubernetes.Interface) {
	bindRole(t, admin, "default", "watch-user-view", "ClusterRole", "view", userSubject("watch-user"))
	cs := tokenClient(t, c, "tok-watch")
	rc := tokenRaw(t, c, "tok-watch")
	storagetest.Eventually(t, 15*time.Second, "watch-user can list", func() error {
		_, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
		return err
	})
	// A full bucket for the burst below: the gateway refills it on the
	// wall clock only (see testUserRate).
	time.Sleep(time.Second)
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	watch := func() (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", rc.base+"/api/v1/namespaces/default/configmaps?watch=1", nil)
		resp, err := rc.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 200 {
			open = append(open, resp)
			return resp, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	for i := range 2 {
		if resp, body := watch(); resp.StatusCode != 200 {
			t.Fatalf("watch %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := watch()
	want429(t, resp, body, "third watch")
	// Ending a watch frees its slot.
	open[0].Body.Close()
	open = open[1:]
	// A full bucket for the burst below: the gateway refills it on the
	// wall clock only (see testUserRate).
	time.Sleep(time.Second)
	storagetest.Eventually(t, 15*time.Second, "a watch after one ended", func() error {
		if resp, body := watch(); resp.StatusCode != 200 {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	})
}

func testListBytes(t *testing.T, c *devcluster.Cluster, admin kubernetes.Interface) {
	ns := "list-bytes"
	bg := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{"k": strings.Repeat("x", 10000)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindRole(t, admin, ns, "list-user-view", "ClusterRole", "view", userSubject("list-user"))
	rc := tokenRaw(t, c, "tok-list")
	storagetest.Eventually(t, 15*time.Second, "list-user can list", func() error {
		resp, body := rc.do(t, "GET", "/api/v1/namespaces/"+ns+"/configmaps", nil)
		if resp.StatusCode != 200 {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	})
	// The list returned ~10 KB: ~4 s of a 2000 B/s budget in debt.
	resp, body := rc.do(t, "GET", "/api/v1/namespaces/"+ns+"/configmaps", nil)
	want429(t, resp, body, "list over the byte budget")
	if resp, body := rc.do(t, "GET", "/api/v1/namespaces/"+ns+"/configmaps/big", nil); resp.StatusCode != 200 {
		t.Fatalf("a GET is not charged: %d %s", resp.StatusCode, body)
	}
}

func testCertReload(t *testing.T, c *devcluster.Cluster) {
	certFile, keyFile := c.Bundle.ServingCertFile, c.Bundle.ServingKeyFile
	oldCert, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	served := func() (*x509.Certificate, error) {
		conn, err := tls.Dial("tcp", c.Addr(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		if v := conn.ConnectionState().Version; v < tls.VersionTLS12 {
			return nil, fmt.Errorf("TLS version %x", v)
		}
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	before, err := served()
	if err != nil {
		t.Fatal(err)
	}
	newCert, newKey := selfSigned(t, "kgate-reloaded")
	// A TLS 1.1 client is refused.
	if conn, err := tls.Dial("tcp", c.Addr(), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
	replace := func(cert, key []byte) {
		// Key first, then certificate: a half-replaced pair is skipped.
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, cert, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	replace(newCert, newKey)
	defer func() {
		replace(oldCert, oldKey)
		storagetest.Eventually(t, 15*time.Second, "original certificate back", func() error {
			got, err := served()
			if err != nil {
				return err
			}
			if !got.Equal(before) {
				return fmt.Errorf("still serving %s", got.Subject)
			}
			return nil
		})
	}()
	storagetest.Eventually(t, 15*time.Second, "reloaded certificate served", func() error {
		got, err := served()
		if err != nil {
			return err
		}
		if got.Subject.CommonName != "kgate-reloaded" {
			return fmt.Errorf("serving %s", got.Subject)
		}
		return nil
	})
}

func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

const fairTokens = `tok-fair-a,fair-a,uid-fair-a
tok-fair-b,fair-b,uid-fair-b
`

// heldHook is a validating webhook that, once hold is called, keeps each
// review until release: the request under review keeps its seat.
type heldHook struct {
	mu   sync.Mutex    // guards gate and hits
	gate chan struct{} // nil: answer at once
	hits int
	held chan string // the name of each object held
}

func (h *heldHook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.hits++
	gate := h.gate
	h.mu.Unlock()
	if gate != nil {
		h.held <- review.Request.Name
		<-gate
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(rw).Encode(review)
}

func (h *heldHook) hold() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

// release lets the held reviews go; once more does nothing.
func (h *heldHook) release() {
	h.mu.Lock()
	if h.gate != nil {
		close(h.gate)
	}
	h.gate = nil
	h.mu.Unlock()
}

// created is the outcome of a create sent in the background.
type created struct {
	name   string
	code   int
	header http.Header
	body   []byte
	err    error
}

// createAsync posts a ConfigMap named name and sends the outcome on out.
func createAsync(ctx context.Context, rc *rawClient, ns, name string, out chan<- created) {
	go func() {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name)
		req, _ := http.NewRequestWithContext(ctx, "POST", rc.base+"/api/v1/namespaces/"+ns+"/configmaps", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := rc.hc.Do(req)
		if err != nil {
			out <- created{name: name, err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		out <- created{name: name, code: resp.StatusCode, header: resp.Header, body: data, err: err}
	}()
}

// gatewayMetric is the value of the first series of name whose labels
// contain each of labels (name="value" pairs), or -1.
func gatewayMetric(t *testing.T, rc *rawClient, name string, labels ...string) float64 {
	t.Helper()
	_, text := rc.do(t, "GET", "/metrics", nil)
	for line := range strings.SplitSeq(string(text), "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return -1
}

// TestFairQueuing: API Priority and Fairness from the objects. A
// PriorityLevelConfiguration given one seat of the gateway's ten and a
// FlowSchema sending fair-a and fair-b to it classify their requests
// (the X-Kubernetes-PF-* headers carry the objects' UIDs; the admin's
// are exempt's); requests beyond the seat wait in their users' queues
// and are served once it frees, rather than 429; a full queue is 429; a
// client that goes away while queued leaves its queue; upstream's
// apiserver_flowcontrol_* metrics count it all. A FlowSchema naming a
// missing level is marked Dangling by the controller. A webhook holding
// the first request keeps the seat taken for as long as the test needs.
func TestFairQueuing(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(fairTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: filepath.Join(dir, "data"), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		TokenAuthFile: tokens,
		Limits:        gateway.LimitsConfig{MaxRequestsInflight: 5, MaxMutatingRequestsInflight: 5, QueueMaxWait: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	waitRBAC(t, c)
	admin, err := kubernetes.NewForConfig(restConfig(t, c, true, nil))
	if err != nil {
		t.Fatal(err)
	}
	adminRaw := newRawClient(t, c)
	bg := context.Background()
	ns := "fair"
	if _, err := admin.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"fair-test": ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindRole(t, admin, ns, "fair-edit", "ClusterRole", "edit", userSubject("fair-a"), userSubject("fair-b"))

	// One seat (ceil(10 × 1 / the shares of all levels)), none lent or
	// borrowed; one queue per user (hand of 1 of 64: fair-a and fair-b
	// hash to different queues), two requests per queue.
	const level = "fair-test"
	fc := admin.FlowcontrolV1()
	zero := int32(0)
	plc, err := fc.PriorityLevelConfigurations().Create(bg, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1), LendablePercent: &zero, BorrowingLimitPercent: &zero,
				LimitResponse: flowcontrolv1.LimitResponse{
					Type:    flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 1, QueueLengthLimit: 2},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fc.FlowSchemas().Create(bg, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         100,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{
					{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "fair-a"}},
					{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "fair-b"}},
				},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"},
				}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var exempt *flowcontrolv1.PriorityLevelConfiguration
	storagetest.Eventually(t, 30*time.Second, "the bootstrap configuration", func() (err error) {
		exempt, err = fc.PriorityLevelConfigurations().Get(bg, "exempt", metav1.GetOptions{})
		return err
	})

	hook := &heldHook{held: make(chan string, 10)}
	srv, caPEM := startTLSServer(t, hook)
	url := srv.URL + "/hold"
	ignore, none, timeout := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone, int32(30)
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(bg, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "fair-hold"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "hold.kgate.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules: configMapRules, FailurePolicy: &ignore, SideEffects: &none, TimeoutSeconds: &timeout,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"fair-test": ns}},
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, b := tokenRaw(t, c, "tok-fair-a"), tokenRaw(t, c, "tok-fair-b")
	seq := 0
	storagetest.Eventually(t, 15*time.Second, "fair-a creates through the webhook, classified by the new FlowSchema", func() error {
		seq++
		resp, body := a.do(t, "POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"warmup-%d"}}`, seq), "Content-Type", "application/json")
		if resp.StatusCode != 201 {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		if got := resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"); got != string(fs.UID) {
			return fmt.Errorf("flow schema UID %q, want %q", got, fs.UID)
		}
		if got := resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"); got != string(plc.UID) {
			return fmt.Errorf("priority level UID %q, want %q", got, plc.UID)
		}
		hook.mu.Lock()
		defer hook.mu.Unlock()
		if hook.hits == 0 {
			return errors.New("the webhook is not called yet")
		}
		return nil
	})
	// The elected gateway creates the exempt FlowSchema in its own time;
	// until the controller has it, upstream classifies by its built-in
	// copy, which has no UID.
	storagetest.Eventually(t, 30*time.Second, "the admin classified by the exempt objects", func() error {
		resp, _ := adminRaw.do(t, "GET", "/api/v1/namespaces/"+ns+"/configmaps", nil)
		if got := resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"); got != string(exempt.UID) {
			return fmt.Errorf("admin's priority level UID %q, want exempt's %q", got, exempt.UID)
		}
		if resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID") == "" {
			return errors.New("no flow schema UID")
		}
		return nil
	})
	levelLabel := `priority_level="` + level + `"`
	// Upstream's metrics are the process's: what this test adds counts
	// (go test -count runs it again in one process).
	counter := func(name string, labels ...string) float64 {
		return max(0, gatewayMetric(t, adminRaw, name, append(labels, levelLabel)...))
	}
	const (
		rejectedTotal = "apiserver_flowcontrol_rejected_requests_total"
		waitCount     = "apiserver_flowcontrol_request_wait_duration_seconds_count"
	)
	queueFull0, timeOut0, waited0 := counter(rejectedTotal, `reason="queue-full"`), counter(rejectedTotal, `reason="time-out"`), counter(waitCount, `execute="true"`)
	queued := func(want float64) {
		t.Helper()
		storagetest.Eventually(t, 15*time.Second, fmt.Sprintf("%v requests queued", want), func() error {
			if got := gatewayMetric(t, adminRaw, "apiserver_flowcontrol_current_inqueue_requests", levelLabel); got != want && (want != 0 || got != -1) {
				return fmt.Errorf("%v queued", got)
			}
			return nil
		})
	}
	hook.hold()
	defer hook.release() // before the cluster closes, should the test fail
	out := make(chan created, 10)
	createAsync(bg, a, ns, "a1", out)
	if got := <-hook.held; got != "a1" {
		t.Fatalf("webhook holds %q", got)
	}
	// a1 holds the only seat: a2, a3 and then b1 wait, each in its
	// user's queue.
	createAsync(bg, a, ns, "a2", out)
	queued(1)
	createAsync(bg, a, ns, "a3", out)
	queued(2)
	createAsync(bg, b, ns, "b1", out)
	queued(3)
	// fair-a's queue is full.
	resp, body := a.do(t, "POST", "/api/v1/namespaces/"+ns+"/configmaps", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a4"}}`), "Content-Type", "application/json")
	want429(t, resp, body, "a create over a full queue")
	if resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID") != string(plc.UID) || resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID") != string(fs.UID) {
		t.Fatalf("429 headers %v, want the level's and schema's UIDs", resp.Header)
	}
	if n := counter(rejectedTotal, `reason="queue-full"`) - queueFull0; n != 1 {
		t.Fatalf("%s{%s,reason=queue-full} rose by %v", rejectedTotal, levelLabel, n)
	}
	// A client going away leaves its queue (upstream counts it as a
	// time-out).
	gone, goAway := context.WithCancel(bg)
	createAsync(gone, b, ns, "b2", out)
	queued(4)
	goAway()
	if r := <-out; r.name != "b2" || r.err == nil {
		t.Fatalf("b2: %+v", r)
	}
	queued(3)
	storagetest.Eventually(t, 15*time.Second, "the cancelled wait counted", func() error {
		if n := counter(rejectedTotal, `reason="time-out"`) - timeOut0; n != 1 {
			return fmt.Errorf("%s{reason=time-out} rose by %v", rejectedTotal, n)
		}
		return nil
	})
	if n := gatewayMetric(t, adminRaw, "kgate_gateway_rejected_total", `reason="priority_and_fairness"`); n != 2 {
		t.Fatalf("kgate_gateway_rejected_total{reason=priority_and_fairness} = %v, want 2", n)
	}
	// Once a1 is let through, the others are served in turn, fairly over
	// the two queues: b1 before a3, though it came last.
	hook.release()
	var order []string
	for range 4 {
		r := <-out
		if r.err != nil || r.code != 201 {
			t.Fatalf("%s: %d %s %v, want 201 after waiting", r.name, r.code, r.body, r.err)
		}
		order = append(order, r.name)
	}
	t.Logf("served: %v", order)
	if order[0] != "a1" || order[3] != "a3" {
		t.Fatalf("served %v: want a1 first and a3 last", order)
	}
	queued(0)
	// The waits were timed: a2, a3 and b1 waited, then executed; b2
	// waited and gave up.
	if n := counter(waitCount, `execute="true"`) - waited0; n < 3 {
		t.Fatalf("%s{%s,execute=true}: %v waits; want a2, a3 and b1's at least", waitCount, levelLabel, n)
	}
	// The seat is free: two creates in a row pass at once.
	for _, name := range []string{"after-1", "after-2"} {
		resp, body := b.do(t, "POST", "/api/v1/namespaces/"+ns+"/configmaps", fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name), "Content-Type", "application/json")
		if resp.StatusCode != 201 {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
		}
	}

	// A FlowSchema naming no level is marked Dangling, through the
	// controller's status apply.
	if _, err := fc.FlowSchemas().Create(bg, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "fair-dangling"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "no-such-level"},
			MatchingPrecedence:         200,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 30*time.Second, "the Dangling condition", func() error {
		got, err := fc.FlowSchemas().Get(bg, "fair-dangling", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionTrue {
				for _, m := range got.ManagedFields {
					if m.Manager == "api-priority-and-fairness-config-consumer-v1" && m.Subresource == "status" {
						return nil
					}
				}
				return fmt.Errorf("managed fields %v", got.ManagedFields)
			}
		}
		return fmt.Errorf("conditions %v", got.Status.Conditions)
	})
}
