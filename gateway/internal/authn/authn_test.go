package authn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// testCA signs certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	cert, key := sign(t, tmpl, nil)
	return &testCA{cert: cert, key: key}
}

// issue makes a leaf certificate; tweak may change the template.
func (ca *testCA) issue(t testing.TB, cn string, orgs []string, usage x509.ExtKeyUsage, tweak func(*x509.Certificate)) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if tweak != nil {
		tweak(tmpl)
	}
	cert, key := sign(t, tmpl, ca)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

func sign(t testing.TB, tmpl *x509.Certificate, ca *testCA) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	parent, parentKey := tmpl, key
	if ca != nil {
		parent, parentKey = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writeFile(t testing.TB, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func pemOf(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

const tokenCSV = `tok-alice,alice,uid-alice,"dev,ops"
tok-bob,bob,uid-bob
`

// fixture is a client CA, a token file and authenticators with and
// without anonymous access.
type fixture struct {
	clientCA, otherCA, servingCA *testCA
	caFile, tokenFile            string
	strict, anon                 *Authenticator
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		clientCA:  newTestCA(t, "client-ca"),
		otherCA:   newTestCA(t, "other-ca"),
		servingCA: newTestCA(t, "serving-ca"),
	}
	f.caFile = writeFile(t, "ca.crt", pemOf(f.clientCA.cert))
	f.tokenFile = writeFile(t, "tokens.csv", tokenCSV)
	var err error
	if f.strict, err = New(Config{ClientCAFile: f.caFile, TokenAuthFile: f.tokenFile}); err != nil {
		t.Fatal(err)
	}
	if f.anon, err = New(Config{ClientCAFile: f.caFile, TokenAuthFile: f.tokenFile, Anonymous: true}); err != nil {
		t.Fatal(err)
	}
	return f
}

// result is what the test server answers: the user, or the 401 reason.
type result struct {
	Status     int
	Name       string
	UID        string
	Groups     []string
	Extra      map[string][]string
	AuthHeader bool // Authorization still on the request after success
	// Identity lists the X-Remote-* headers still on the request after
	// authentication.
	Identity []string
}

// serve starts a fasthttp TLS server on loopback whose handler
// authenticates with f.anon under /anon and f.strict elsewhere, and
// returns its address.
func (f *fixture) serve(t *testing.T, clientAuth tls.ClientAuthType, clientCAs *x509.CertPool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		a := f.strict
		if strings.HasPrefix(string(ctx.Path()), "/anon") {
			a = f.anon
		}
		var res result
		u, err := a.Authenticate(ctx)
		switch {
		case errors.Is(err, ErrUnauthorized):
			res.Status = 401
		case err != nil:
			res.Status = 500
		default:
			res = result{Status: 200, Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra(),
				AuthHeader: len(ctx.Request.Header.Peek("Authorization")) > 0}
		}
		for k := range ctx.Request.Header.All() {
			if strings.HasPrefix(strings.ToLower(string(k)), "x-remote-") {
				res.Identity = append(res.Identity, string(k))
			}
		}
		ctx.SetStatusCode(res.Status)
		_ = json.NewEncoder(ctx).Encode(res)
	}}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{f.servingCA.issue(t, "server", nil, x509.ExtKeyUsageServerAuth, nil)},
		ClientAuth:   clientAuth,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// call sends GET path to addr with the client certificate (if any) and
// the Authorization header (if not empty).
func (f *fixture) call(t *testing.T, addr, path string, cert *tls.Certificate, authz string) result {
	t.Helper()
	return f.callWith(t, addr, path, cert, authz, nil)
}

// callWith is call with further request headers.
func (f *fixture) callWith(t *testing.T, addr, path string, cert *tls.Certificate, authz string, headers http.Header) result {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(f.servingCA.cert)
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header[k] = v
	}
	if authz != "" {
		req.Header["Authorization"] = []string{authz}
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var res result
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("%d %q: %v", resp.StatusCode, body, err)
	}
	return res
}

func TestAuthenticateOverTLS(t *testing.T) {
	fx := newFixture(t)
	// RequestClientCert, as kube-apiserver: every presented certificate
	// reaches the authenticator, which decides.
	addr := fx.serve(t, tls.RequestClientCert, nil)

	carol := fx.clientCA.issue(t, "carol", []string{"team1", "team2"}, x509.ExtKeyUsageClientAuth, nil)
	noGroups := fx.clientCA.issue(t, "dave", nil, x509.ExtKeyUsageClientAuth, nil)
	foreign := fx.otherCA.issue(t, "carol", []string{"system:masters"}, x509.ExtKeyUsageClientAuth, nil)
	serverUsage := fx.clientCA.issue(t, "carol", nil, x509.ExtKeyUsageServerAuth, nil)
	expired := fx.clientCA.issue(t, "carol", nil, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	})
	noCN := fx.clientCA.issue(t, "", []string{"team1"}, x509.ExtKeyUsageClientAuth, nil)

	anonymous := result{Status: 200, Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	carolUser := result{Status: 200, Name: "carol", Groups: []string{"team1", "team2", "system:authenticated"}}
	alice := result{Status: 200, Name: "alice", UID: "uid-alice", Groups: []string{"dev", "ops", "system:authenticated"}}
	bob := result{Status: 200, Name: "bob", UID: "uid-bob", Groups: []string{"system:authenticated"}}
	denied := result{Status: 401}

	f := func(name, path string, cert *tls.Certificate, authz string, want result) {
		t.Run(name, func(t *testing.T) {
			got := fx.call(t, addr, path, cert, authz)
			if got.Status != want.Status || got.Name != want.Name || got.UID != want.UID ||
				!slices.Equal(got.Groups, want.Groups) || got.AuthHeader {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	// Client certificates.
	f("cert", "/", &carol, "", carolUser)
	f("cert without O", "/", &noGroups, "", result{Status: 200, Name: "dave", Groups: []string{"system:authenticated"}})
	f("cert from another CA", "/", &foreign, "", denied)
	f("cert for server auth", "/", &serverUsage, "", denied)
	f("expired cert", "/", &expired, "", denied)
	f("cert without CN", "/", &noCN, "", denied)
	// Bearer tokens.
	f("token", "/", nil, "Bearer tok-alice", alice)
	f("token without groups", "/", nil, "Bearer tok-bob", bob)
	f("lowercase scheme", "/", nil, "bearer tok-alice", alice)
	f("surrounding spaces", "/", nil, "  Bearer tok-alice  ", alice)
	f("trailing field ignored", "/", nil, "Bearer tok-alice trailing", alice)
	f("wrong token", "/", nil, "Bearer tok-mallory", denied)
	f("token prefix", "/", nil, "Bearer tok-alic", denied)
	f("token case", "/", nil, "Bearer TOK-ALICE", denied)
	// Malformed Authorization headers: no credentials.
	f("scheme only", "/", nil, "Bearer", denied)
	f("double space", "/", nil, "Bearer  tok-alice", denied)
	f("basic", "/", nil, "Basic YWxpY2U6cHc=", denied)
	f("token without scheme", "/", nil, "tok-alice", denied)
	f("tab separator", "/", nil, "Bearer\ttok-alice", denied)
	f("non-ASCII token", "/", nil, "Bearer \xff\xfe", denied)
	f("missing", "/", nil, "", denied)
	// Both: the certificate is tried first; a failing method does not
	// stop another from succeeding (k8s.io/apiserver union).
	f("cert and wrong token", "/", &carol, "Bearer nope", carolUser)
	f("foreign cert and token", "/", &foreign, "Bearer tok-alice", alice)
	// Anonymous enabled: no credentials pass, bad credentials do not.
	f("anon missing", "/anon", nil, "", anonymous)
	f("anon basic", "/anon", nil, "Basic YWxpY2U6cHc=", anonymous)
	f("anon scheme only", "/anon", nil, "Bearer", anonymous)
	f("anon wrong token", "/anon", nil, "Bearer tok-mallory", denied)
	f("anon foreign cert", "/anon", &foreign, "", denied)
	f("anon token", "/anon", nil, "Bearer tok-alice", alice)
	f("anon cert", "/anon", &carol, "", carolUser)
}

// TestAuthenticateVerifyIfGiven uses the TLS mode of deploy/pki's
// ServingTLS: the handshake checks certificates against the client CA, so
// a Go client does not even send one from another CA.
func TestAuthenticateVerifyIfGiven(t *testing.T) {
	fx := newFixture(t)
	pool := x509.NewCertPool()
	pool.AddCert(fx.clientCA.cert)
	addr := fx.serve(t, tls.VerifyClientCertIfGiven, pool)
	carol := fx.clientCA.issue(t, "carol", []string{"team1"}, x509.ExtKeyUsageClientAuth, nil)
	foreign := fx.otherCA.issue(t, "carol", nil, x509.ExtKeyUsageClientAuth, nil)

	if got := fx.call(t, addr, "/", &carol, ""); got.Status != 200 || got.Name != "carol" {
		t.Errorf("valid cert: %+v", got)
	}
	if got := fx.call(t, addr, "/", &foreign, ""); got.Status != 401 {
		t.Errorf("foreign cert: %+v", got)
	}
	if got := fx.call(t, addr, "/anon", &foreign, ""); got.Name != "system:anonymous" {
		t.Errorf("foreign cert, anonymous on: %+v", got)
	}
}

func TestNew(t *testing.T) {
	ca := newTestCA(t, "ca")
	caFile := writeFile(t, "ca.crt", pemOf(ca.cert))
	tokens := writeFile(t, "tokens.csv", tokenCSV)
	missing := filepath.Join(t.TempDir(), "missing")
	f := func(name string, cfg Config, wantErr bool) {
		t.Run(name, func(t *testing.T) {
			a, err := New(cfg)
			if wantErr {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("err = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil || a == nil {
				t.Errorf("New: %v", err)
			}
		})
	}
	f("nothing", Config{}, true)
	f("anonymous only", Config{Anonymous: true}, false)
	f("client CA only", Config{ClientCAFile: caFile}, false)
	f("tokens only", Config{TokenAuthFile: tokens}, false)
	f("missing CA file", Config{ClientCAFile: missing}, true)
	f("CA file without certificates", Config{ClientCAFile: writeFile(t, "empty.crt", "not a cert")}, true)
	f("CA file with a key", Config{ClientCAFile: writeFile(t, "k.pem", "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n")}, true)
	f("missing token file", Config{TokenAuthFile: missing}, true)
	f("token file with two columns", Config{TokenAuthFile: writeFile(t, "t.csv", "tok,user\n")}, true)
	f("token file with a bad quote", Config{TokenAuthFile: writeFile(t, "t.csv", "tok,user,uid,\"g1\n")}, true)
}

// TestAuthenticateWithoutTLS covers a plain connection (no TLS state) and
// a request context that was never served.
func TestAuthenticateWithoutTLS(t *testing.T) {
	fx := newFixture(t)
	f := func(name string, a *Authenticator, authz, wantUser string) {
		t.Run(name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			if authz != "" {
				ctx.Request.Header.Set("Authorization", authz)
			}
			u, err := a.Authenticate(&ctx)
			if wantUser == "" {
				if !errors.Is(err, ErrUnauthorized) || u != nil {
					t.Errorf("got %v, %v; want ErrUnauthorized", u, err)
				}
				return
			}
			if err != nil || u.GetName() != wantUser {
				t.Errorf("got %v, %v; want %s", u, err, wantUser)
			}
		})
	}
	f("no credentials", fx.strict, "", "")
	f("token", fx.strict, "Bearer tok-bob", "bob")
	f("anonymous", fx.anon, "", "system:anonymous")
	anonOnly, err := New(Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	f("anonymous only, token ignored", anonOnly, "Bearer tok-bob", "system:anonymous")

	// Concurrent use shares the pooled request shells (for -race).
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				tok, want := "Bearer tok-alice", "alice"
				if (g+i)%2 == 0 {
					tok, want = "Bearer tok-bob", "bob"
				}
				var ctx fasthttp.RequestCtx
				ctx.Request.Header.Set("Authorization", tok)
				if u, err := fx.anon.Authenticate(&ctx); err != nil || u.GetName() != want {
					t.Errorf("got %v, %v; want %s", u, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzBearerHeader feeds arbitrary Authorization headers: Authenticate must
// not panic, must fail only with ErrUnauthorized, and may succeed only with
// a token from the file.
func FuzzBearerHeader(f *testing.F) {
	for _, s := range []string{"", "Bearer tok-alice", "bearer tok-bob", "Bearer", "Bearer ", "Bearer  x",
		"Basic YWxpY2U6cHc=", "Bearer tok-alice extra", " \t", "\x00", "Bearer \xff", "BEARER tok-alice\r\n"} {
		f.Add(s)
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, header string) {
		for _, a := range []*Authenticator{fx.strict, fx.anon} {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.Set("Authorization", header)
			u, err := a.Authenticate(&ctx)
			if err != nil {
				if !errors.Is(err, ErrUnauthorized) || u != nil {
					t.Fatalf("%q: got %v, %v", header, u, err)
				}
				continue
			}
			switch u.GetName() {
			case "alice", "bob":
				tok := "tok-" + u.GetName()
				if !strings.Contains(header, tok) {
					t.Fatalf("%q authenticated as %s", header, u.GetName())
				}
			case "system:anonymous":
				if a != fx.anon {
					t.Fatalf("%q: anonymous while disabled", header)
				}
			default:
				t.Fatalf("%q: unexpected user %v", header, u)
			}
		}
	})
}
