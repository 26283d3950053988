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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
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
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Config{
		DataDir: filepath.Join(dir, "data"), Listen: addr, UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		TokenAuthFile: tokens,
		Audit:         gateway.AuditConfig{PolicyFile: policy, LogPath: auditLog},
		Limits: gateway.LimitsConfig{
			MaxMutatingRequestsInflight: 1,
			UserQPS:                     5, UserBurst: 5,
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
	t.Run("in flight", func(t *testing.T) { testInflight(t, c, admin) })
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
	eventually(t, "audit log", func() error {
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
	time.Sleep(time.Second)
	if resp, body := rc.do(t, "GET", "/api/v1/namespaces/default/configmaps", nil); resp.StatusCode != 403 {
		t.Fatalf("after a refill: %d %s", resp.StatusCode, body)
	}
}

func testWatchCap(t *testing.T, c *devcluster.Cluster, admin kubernetes.Interface) {
	bindRole(t, admin, "default", "watch-user-view", "ClusterRole", "view", userSubject("watch-user"))
	cs := tokenClient(t, c, "tok-watch")
	rc := tokenRaw(t, c, "tok-watch")
	eventually(t, "watch-user can list", func() error {
		_, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
		return err
	})
	time.Sleep(time.Second) // refill the rate bucket
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
	time.Sleep(time.Second) // refill the rate bucket
	eventually(t, "a watch after one ended", func() error {
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
	eventually(t, "list-user can list", func() error {
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

func testInflight(t *testing.T, c *devcluster.Cluster, admin kubernetes.Interface) {
	ns := "inflight"
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc := newRawClient(t, c)
	// One mutating request in flight per level: concurrent creates by the
	// admin (level system) collide.
	for round := 0; round < 5; round++ {
		var mu sync.Mutex
		var got *http.Response
		var gotBody []byte
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d-%d"}}`, round, i)
				req, _ := http.NewRequest("POST", rc.base+"/api/v1/namespaces/"+ns+"/configmaps", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := rc.hc.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				if resp.StatusCode == 429 {
					mu.Lock()
					got, gotBody = resp, data
					mu.Unlock()
				} else if resp.StatusCode != 201 {
					t.Errorf("create: %d %s", resp.StatusCode, data)
				}
			})
		}
		wg.Wait()
		if got != nil {
			want429(t, got, gotBody, "create over the in-flight limit")
			if !bytes.Contains(gotBody, []byte("system")) {
				t.Fatalf("429 does not name the level: %s", gotBody)
			}
			_, metrics := rc.do(t, "GET", "/metrics", nil)
			if !strings.Contains(string(metrics), `kgate_gateway_rejected_total{gateway="gateway-0",reason="inflight"}`) {
				t.Fatal("no kgate_gateway_rejected_total{reason=inflight}")
			}
			return
		}
	}
	t.Fatal("no create was rejected with one mutating request in flight allowed")
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
		eventually(t, "original certificate back", func() error {
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
	eventually(t, "reloaded certificate served", func() error {
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
