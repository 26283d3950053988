package devcluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage/storagetest"
)

// The authentication tests share a cluster of their own with an OIDC
// issuer (its keys in a JWKS file) and a front proxy (its CA and client
// certificate) configured.
var authnShared struct {
	once      sync.Once
	c         *devcluster.Cluster
	dir       string
	err       error
	oidcKey   *rsa.PrivateKey
	proxyCert []byte // PEM
	proxyKey  []byte // PEM
}

const (
	oidcIssuer   = "https://oidc.example.com"
	oidcClientID = "kgate"
	proxyName    = "front-proxy"
)

func authnCluster(tb testing.TB) *devcluster.Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test: skipped under -short")
	}
	s := &authnShared
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "kgate-devcluster-authn-"); s.err != nil {
			return
		}
		var cfg devcluster.Config
		if cfg, s.err = authnConfig(s.dir); s.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.c, s.err = startDev(ctx, cfg)
	})
	if s.err != nil {
		tb.Fatalf("cannot start the authn cluster: %v", s.err)
	}
	waitRBAC(tb, s.c)
	return s.c
}

// authnConfig writes the issuer's JWKS and the front proxy's CA and
// certificate into dir and returns the cluster's config.
func authnConfig(dir string) (devcluster.Config, error) {
	s := &authnShared
	var err error
	if s.oidcKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return devcluster.Config{}, err
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: s.oidcKey.Public(), KeyID: "k1", Use: "sig"}}})
	if err != nil {
		return devcluster.Config{}, err
	}
	jwksFile := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		return devcluster.Config{}, err
	}
	caCert, caKey, err := newCert(pkix.Name{CommonName: "front-proxy-ca"}, nil, nil)
	if err != nil {
		return devcluster.Config{}, err
	}
	caFile := filepath.Join(dir, "front-proxy-ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o600); err != nil {
		return devcluster.Config{}, err
	}
	proxy, proxyKey, err := newCert(pkix.Name{CommonName: proxyName}, caCert, caKey)
	if err != nil {
		return devcluster.Config{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(proxyKey)
	if err != nil {
		return devcluster.Config{}, err
	}
	s.proxyCert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Raw})
	s.proxyKey = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return devcluster.Config{
		DataDir: filepath.Join(dir, "data"), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		OIDC: gateway.OIDCConfig{
			IssuerURL: oidcIssuer, ClientID: oidcClientID, GroupsClaim: "groups", GroupsPrefix: "oidc:",
			RequiredClaims: map[string]string{"tenant": "acme"}, JWKSFile: jwksFile,
		},
		RequestHeader: gateway.RequestHeaderConfig{ClientCAFile: caFile, AllowedNames: []string{proxyName}},
	}, nil
}

// newCert makes an ECDSA certificate: a CA when parent is nil, else a
// client certificate signed by parent.
func newCert(subject pkix.Name, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage, tmpl.ExtKeyUsage = true, true, x509.KeyUsageCertSign, nil
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// closeAuthnCluster stops the authentication tests' cluster (TestMain).
func closeAuthnCluster() error {
	defer func() {
		if authnShared.dir != "" {
			os.RemoveAll(authnShared.dir)
		}
	}()
	if authnShared.c == nil {
		return nil
	}
	return authnShared.c.Close()
}

// idToken is an ID token signed by the test issuer's key with claims
// edited: a nil value removes a claim.
func idToken(tb testing.TB, edits map[string]any) string {
	tb.Helper()
	now := time.Now()
	claims := map[string]any{
		"iss": oidcIssuer, "aud": oidcClientID, "sub": "jane", "groups": []string{"dev"}, "tenant": "acme",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	for k, v := range edits {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: authnShared.oidcKey, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// whoami is `kubectl auth whoami`: the user the gateway sees.
func whoami(tb testing.TB, cs kubernetes.Interface) (authenticationv1.UserInfo, error) {
	tb.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// TestOIDCTokens: ID tokens of the configured issuer are users with the
// issuer-prefixed name and prefixed groups, under RBAC like any user;
// expired, foreign and incomplete tokens are 401.
func TestOIDCTokens(t *testing.T) {
	c := authnCluster(t)
	jane := tokenClient(t, c, idToken(t, nil))
	u, err := whoami(t, jane)
	if err != nil {
		t.Fatal(err)
	}
	name := oidcIssuer + "#jane"
	if u.Username != name || !slices.Equal(u.Groups, []string{"oidc:dev", "system:authenticated"}) {
		t.Errorf("whoami %+v", u)
	}
	for what, edits := range map[string]map[string]any{
		"expired":                {"exp": time.Now().Add(-time.Minute).Unix()},
		"another issuer":         {"iss": "https://other.example.com"},
		"another audience":       {"aud": "someone-else"},
		"required claim missing": {"tenant": nil},
		"required claim differs": {"tenant": "evil"},
	} {
		_, err := whoami(t, tokenClient(t, c, idToken(t, edits)))
		checkAPIError(t, err, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		if t.Failed() {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// RBAC applies to the prefixed name.
	admin := clientset(t, c, false, nil)
	ns := uniqueNS("oidc")
	ensureNamespace(t, admin, ns)
	ctx := context.Background()
	_, err = jane.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`pods is forbidden: User "`+name+`" cannot list resource "pods" in API group "" in the namespace "`+ns+`"`)
	bindRole(t, admin, ns, "oidc-dev-view", "ClusterRole", "view", groupSubject("oidc:dev"))
	storagetest.Eventually(t, 15*time.Second, "the OIDC group lists pods once bound to view", func() error {
		_, err := jane.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	})
}

// headerTransport adds identity headers to every request, as a front
// proxy does.
type headerTransport struct {
	next    http.RoundTripper
	headers http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header[k] = v
	}
	return t.next.RoundTrip(req)
}

// proxyConfig is c's config with the given client certificate (the front
// proxy's when nil) sending headers.
func proxyConfig(tb testing.TB, c *devcluster.Cluster, certPEM, keyPEM []byte, headers http.Header) *rest.Config {
	tb.Helper()
	cfg := restConfig(tb, c, false, nil)
	if certPEM != nil || keyPEM != nil {
		cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
		cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = certPEM, keyPEM
	}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return headerTransport{next: rt, headers: headers} }
	return cfg
}

// TestRequestHeaderProxy: a front proxy's requests are served as the user
// its headers name, RBAC included; the same headers from anyone else mean
// nothing.
func TestRequestHeaderProxy(t *testing.T) {
	c := authnCluster(t)
	s := &authnShared
	headers := http.Header{
		"X-Remote-User": {"proxied-jane"}, "X-Remote-Group": {"proxy-team", "readers"},
		"X-Remote-Extra-Scopes": {"s1", "s2"},
	}
	proxied := kubernetes.NewForConfigOrDie(proxyConfig(t, c, s.proxyCert, s.proxyKey, headers))
	u, err := whoami(t, proxied)
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "proxied-jane" || !slices.Equal(u.Groups, []string{"proxy-team", "readers", "system:authenticated"}) ||
		!slices.Equal(u.Extra["scopes"], authenticationv1.ExtraValue{"s1", "s2"}) {
		t.Errorf("whoami through the proxy: %+v", u)
	}

	admin := clientset(t, c, false, nil)
	ns := uniqueNS("proxy")
	ensureNamespace(t, admin, ns)
	ctx := context.Background()
	_, err = proxied.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	checkAPIError(t, err, http.StatusForbidden, metav1.StatusReasonForbidden,
		`pods is forbidden: User "proxied-jane" cannot list resource "pods" in API group "" in the namespace "`+ns+`"`)
	bindRole(t, admin, ns, "proxied-jane-view", "ClusterRole", "view", userSubject("proxied-jane"))
	storagetest.Eventually(t, 15*time.Second, "the proxied user lists pods once bound to view", func() error {
		_, err := proxied.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	})

	// A plain Go client (not client-go, which always sends its
	// certificate) sends one only if the server asks for its CA: the
	// gateway advertises the proxy CA besides the dev CA.
	if got := plainProxyWhoami(t, c, headers); got != "proxied-jane" {
		t.Errorf("whoami through a net/http proxy: %q", got)
	}

	// The admin certificate (the dev CA, not the proxy CA) with the same
	// headers is the admin.
	u, err = whoami(t, kubernetes.NewForConfigOrDie(proxyConfig(t, c, nil, nil, headers)))
	if err != nil {
		t.Fatal(err)
	}
	if u.Username == "proxied-jane" || !slices.Contains(u.Groups, "system:masters") {
		t.Errorf("admin certificate with identity headers: %+v", u)
	}
	// A bearer token with the headers is the token's user.
	u, err = whoami(t, kubernetes.NewForConfigOrDie(func() *rest.Config {
		cfg := tokenConfig(t, c, idToken(t, nil))
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return headerTransport{next: rt, headers: headers} }
		return cfg
	}()))
	if err != nil || u.Username != oidcIssuer+"#jane" {
		t.Errorf("OIDC token with identity headers: %+v, %v", u, err)
	}
	// The proxy without a username header is nobody: its certificate
	// is not a client certificate of the dev CA.
	_, err = whoami(t, kubernetes.NewForConfigOrDie(proxyConfig(t, c, s.proxyCert, s.proxyKey, http.Header{"X-Remote-Group": {"readers"}})))
	checkAPIError(t, err, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
}

// plainProxyWhoami posts a SelfSubjectReview with net/http and the proxy's
// certificate in tls.Config.Certificates, and returns the username.
func plainProxyWhoami(t *testing.T, c *devcluster.Cluster, headers http.Header) string {
	t.Helper()
	s := &authnShared
	pair, err := tls.X509KeyPair(s.proxyCert, s.proxyKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(c.Bundle.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}},
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "https://"+c.Addr()+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r authenticationv1.SelfSubjectReview
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("%d: %v", resp.StatusCode, err)
	}
	return r.Status.UserInfo.Username
}

// TestOIDCAndRequestHeaderConfigErrors: bad options stop kgate dev with
// the gateway's error.
func TestOIDCAndRequestHeaderConfigErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	dir := t.TempDir()
	f := func(name string, edit func(*devcluster.Config), want string) {
		t.Run(name, func(t *testing.T) {
			cfg := devcluster.Config{DataDir: filepath.Join(dir, name), UnsafeNoFsync: true, Logger: testLogger()}
			edit(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := startDev(ctx, cfg)
			if err == nil {
				c.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v; want %q", err, want)
			}
		})
	}
	f("http-issuer", func(c *devcluster.Config) {
		c.OIDC = gateway.OIDCConfig{IssuerURL: "http://oidc.example.com", ClientID: "kgate", JWKSFile: "x"}
	}, "cannot make gateway: oidc: invalid config: the issuer URL \"http://oidc.example.com\" must be an https URL")
	f("no-issuer", func(c *devcluster.Config) {
		c.OIDC = gateway.OIDCConfig{ClientID: "kgate"}
	}, "cannot make gateway: the OIDC options need an issuer URL")
	f("missing-ca", func(c *devcluster.Config) {
		c.RequestHeader = gateway.RequestHeaderConfig{ClientCAFile: filepath.Join(dir, "missing")}
	}, "cannot make gateway: authn: invalid config: cannot read request-header client CA file")
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}
