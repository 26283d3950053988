package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pair is a PEM certificate and key.
type pair struct{ cert, key []byte }

// testCA is a CA made for one test: it signs the webhook's serving
// certificate and the gateway's client certificate.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	serial int64
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "authz-webhook-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// issue signs a leaf: a server certificate for 127.0.0.1 or a client
// certificate for cn.
func (ca *testCA) issue(t *testing.T, cn string, server bool) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
}

// received is one review the fake webhook got.
type received struct {
	path       string
	apiVersion string
	kind       string
	clientCN   string
	bearer     string
	raw        map[string]any
	spec       authorizationv1.SubjectAccessReviewSpec
	// gone is closed when the test ends: an answer that waits on it never
	// comes while the client waits. (Waiting on the request's context
	// made the answer depend on when net/http ends it: once, under load,
	// the slow answer arrived in time and the call was allowed.)
	gone <-chan struct{}
}

// fakeWebhook is a SubjectAccessReview service over HTTPS with its own
// CA: it requires a client certificate of that CA or the token, records
// what it received and answers with answer.
type fakeWebhook struct {
	srv   *httptest.Server
	ca    *testCA
	token string

	ended chan struct{} // closed when the test ends, before srv closes

	mu     sync.Mutex // guards got and answer
	got    []received
	answer func(r received) (int, string) // status code and body
}

const testToken = "webhook-test-token"

func newFakeWebhook(t *testing.T, answer func(received) (int, string)) *fakeWebhook {
	t.Helper()
	ca := newCA(t)
	serving := ca.issue(t, "webhook", true)
	tc, err := tls.X509KeyPair(serving.cert, serving.key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	f := &fakeWebhook{ca: ca, token: testToken, answer: answer, ended: make(chan struct{})}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{tc}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.ended) }) // first: srv.Close waits for the handlers
	return f
}

func (f *fakeWebhook) serve(w http.ResponseWriter, r *http.Request) {
	rec := received{path: r.URL.Path, gone: f.ended}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		rec.clientCN = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	if h := r.Header.Get("Authorization"); len(h) > 7 {
		rec.bearer = h[7:]
	}
	if rec.clientCN == "" && rec.bearer != f.token {
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var tm struct {
		APIVersion string                                  `json:"apiVersion"`
		Kind       string                                  `json:"kind"`
		Spec       authorizationv1.SubjectAccessReviewSpec `json:"spec"`
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &tm) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	_ = json.Unmarshal(body, &rec.raw)
	rec.apiVersion, rec.kind, rec.spec = tm.APIVersion, tm.Kind, tm.Spec
	f.mu.Lock()
	f.got = append(f.got, rec)
	answer := f.answer
	f.mu.Unlock()
	code, out := answer(rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, out)
}

func (f *fakeWebhook) calls() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

func (f *fakeWebhook) setAnswer(a func(received) (int, string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = a
}

// kubeconfig writes a kubeconfig for the webhook to a temporary
// directory: the CA as certificate-authority-data and either a client
// certificate (as data) or the bearer token.
func (f *fakeWebhook) kubeconfig(t *testing.T, useToken bool) string {
	t.Helper()
	auth := &clientcmdapi.AuthInfo{}
	if useToken {
		auth.Token = f.token
	} else {
		c := f.ca.issue(t, "kgate-gateway", false)
		auth.ClientCertificateData, auth.ClientKeyData = c.cert, c.key
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"authz": {Server: f.srv.URL + "/authorize", CertificateAuthorityData: f.ca.pem}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"kgate": auth},
		Contexts:       map[string]*clientcmdapi.Context{"webhook": {Cluster: "authz", AuthInfo: "kgate"}},
		CurrentContext: "webhook",
	}
	file := filepath.Join(t.TempDir(), "authz-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// answer is a review answer's body.
func answer(allowed, denied bool, reason string) string {
	b, _ := json.Marshal(authorizationv1.SubjectAccessReview{
		TypeMeta: metaSAR,
		Status:   authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Denied: denied, Reason: reason},
	})
	return string(b)
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
