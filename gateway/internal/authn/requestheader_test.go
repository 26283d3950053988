package authn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// TestRequestHeader: front proxies with a certificate from the
// request-header CA are trusted for the identity in their headers; nobody
// else is, and the headers never survive authentication.
func TestRequestHeader(t *testing.T) {
	fx := newFixture(t)
	proxyCA := newTestCA(t, "front-proxy-ca")
	proxyCAFile := writeFile(t, "front-proxy-ca.crt", pemOf(proxyCA.cert))
	var err error
	// strict: one allowed proxy name, default headers, no anonymous.
	if fx.strict, err = New(Config{
		ClientCAFile: fx.caFile, TokenAuthFile: fx.tokenFile,
		RequestHeader: RequestHeaderConfig{ClientCAFile: proxyCAFile, AllowedNames: []string{"front-proxy"}},
	}); err != nil {
		t.Fatal(err)
	}
	// anon: any CN from the proxy CA, a UID header, anonymous on.
	if fx.anon, err = New(Config{
		ClientCAFile: fx.caFile, TokenAuthFile: fx.tokenFile, Anonymous: true,
		RequestHeader: RequestHeaderConfig{ClientCAFile: proxyCAFile, UIDHeaders: []string{"X-Remote-Uid"}},
	}); err != nil {
		t.Fatal(err)
	}
	addr := fx.serve(t, tls.RequestClientCert, nil)

	proxy := proxyCA.issue(t, "front-proxy", nil, x509.ExtKeyUsageClientAuth, nil)
	intruder := proxyCA.issue(t, "intruder", nil, x509.ExtKeyUsageClientAuth, nil)
	proxyServerUsage := proxyCA.issue(t, "front-proxy", nil, x509.ExtKeyUsageServerAuth, nil)
	proxyExpired := proxyCA.issue(t, "front-proxy", nil, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	})
	// A client certificate from the client CA with the proxy's name.
	carol := fx.clientCA.issue(t, "carol", []string{"team1"}, x509.ExtKeyUsageClientAuth, nil)
	fakeProxy := fx.clientCA.issue(t, "front-proxy", nil, x509.ExtKeyUsageClientAuth, nil)

	identity := http.Header{
		"X-Remote-User":                     {"jane"},
		"X-Remote-Uid":                      {"uid-jane"},
		"X-Remote-Group":                    {"dev", "ops"},
		"X-Remote-Extra-Scopes":             {"view", "edit"},
		"X-Remote-Extra-Acme.com%2fproject": {"p1"},
	}
	jane := result{Status: 200, Name: "jane", Groups: []string{"dev", "ops", "system:authenticated"},
		Extra: map[string][]string{"scopes": {"view", "edit"}, "acme.com/project": {"p1"}}}
	janeUID := jane
	janeUID.UID = "uid-jane"
	carolUser := result{Status: 200, Name: "carol", Groups: []string{"team1", "system:authenticated"}}
	alice := result{Status: 200, Name: "alice", UID: "uid-alice", Groups: []string{"dev", "ops", "system:authenticated"}}
	anonymous := result{Status: 200, Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	denied := result{Status: 401}

	f := func(name, path string, cert *tls.Certificate, authz string, headers http.Header, want result) {
		t.Run(name, func(t *testing.T) {
			got := fx.callWith(t, addr, path, cert, authz, headers)
			if path != "/anon" {
				// Not a configured header there: left alone.
				got.Identity = slices.DeleteFunc(got.Identity, func(h string) bool { return h == "X-Remote-Uid" })
			}
			if len(got.Identity) > 0 {
				t.Errorf("identity headers left on the request: %v", got.Identity)
			}
			if got.Status != want.Status || got.Name != want.Name || got.UID != want.UID ||
				!slices.Equal(got.Groups, want.Groups) || got.AuthHeader {
				t.Errorf("got %+v, want %+v", got, want)
			}
			if want.Extra != nil && !maps.EqualFunc(got.Extra, want.Extra, slices.Equal) {
				t.Errorf("extra %v, want %v", got.Extra, want.Extra)
			}
		})
	}
	with := func(edits ...string) http.Header {
		h := identity.Clone()
		for i := 0; i+1 < len(edits); i += 2 {
			if edits[i+1] == "" {
				delete(h, edits[i])
			} else {
				h[edits[i]] = []string{edits[i+1]}
			}
		}
		return h
	}
	// The proxy: its headers are the user (UID headers off by default).
	f("proxy", "/", &proxy, "", identity, jane)
	f("proxy, UID header on", "/anon", &proxy, "", identity, janeUID)
	f("proxy and a token", "/", &proxy, "Bearer tok-bob", identity, jane)
	f("proxy, lower-case headers", "/", &proxy, "", http.Header{"x-remote-user": {"jane"}, "x-remote-group": {"dev"}},
		result{Status: 200, Name: "jane", Groups: []string{"dev", "system:authenticated"}})
	f("proxy, user only", "/", &proxy, "", http.Header{"X-Remote-User": {"jane"}},
		result{Status: 200, Name: "jane", Groups: []string{"system:authenticated"}})
	f("proxy, two users: the first", "/", &proxy, "", with("X-Remote-User", "jane", "X-Remote-Group", ""),
		result{Status: 200, Name: "jane", Groups: []string{"system:authenticated"}})
	// Proxy certificates that are not good enough: 401, never downgraded.
	f("CN not allowed", "/", &intruder, "", identity, denied)
	f("CN not allowed, anonymous on", "/anon", &intruder, "", identity, janeUID) // any CN there
	f("proxy cert for server auth", "/", &proxyServerUsage, "", identity, denied)
	f("expired proxy cert", "/", &proxyExpired, "", identity, denied)
	f("expired proxy cert, anonymous on", "/anon", &proxyExpired, "", identity, denied)
	// No username header: the request-header authenticator has no
	// opinion, and the proxy's certificate is not a client certificate.
	f("proxy without user header", "/", &proxy, "", with("X-Remote-User", ""), denied)
	f("proxy without user header, token", "/", &proxy, "Bearer tok-alice", with("X-Remote-User", ""), alice)
	f("proxy with an empty user header, token", "/", &proxy, "Bearer tok-alice", with("X-Remote-User", " "), alice)
	// Clients that are not the proxy: the headers are ignored and
	// stripped.
	f("headers without a cert", "/", nil, "", identity, denied)
	f("headers without a cert, anonymous on", "/anon", nil, "", identity, anonymous)
	f("headers with a client cert", "/", &carol, "", identity, carolUser)
	f("headers with a client cert named like the proxy", "/", &fakeProxy, "", identity,
		result{Status: 200, Name: "front-proxy", Groups: []string{"system:authenticated"}})
	f("headers with a token", "/", nil, "Bearer tok-alice", identity, alice)
	f("headers with a wrong token", "/anon", nil, "Bearer tok-mallory", identity, denied)
	// Without identity headers nothing changes.
	f("client cert", "/", &carol, "", nil, carolUser)
	f("token", "/", nil, "Bearer tok-alice", nil, alice)
}

// TestRequestHeaderStripped: the identity headers go whatever the outcome,
// other headers stay; with request-header authentication off they are
// not touched (they mean nothing then).
func TestRequestHeaderStripped(t *testing.T) {
	proxyCA := newTestCA(t, "front-proxy-ca")
	on, err := New(Config{Anonymous: true, RequestHeader: RequestHeaderConfig{
		ClientCAFile:    writeFile(t, "ca.crt", pemOf(proxyCA.cert)),
		UsernameHeaders: []string{"X-User", "X-Remote-User"}, GroupHeaders: []string{"X-Groups"},
		ExtraHeaderPrefixes: []string{"X-Extra-", "X-Remote-Extra-"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	off, err := New(Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	set := func(ctx *fasthttp.RequestCtx) {
		for _, h := range []string{"X-User", "x-remote-user", "X-Groups", "X-Groups", "X-Extra-A", "x-remote-extra-b", "X-Remote-Group", "X-Other"} {
			ctx.Request.Header.Add(h, "v")
		}
	}
	left := func(ctx *fasthttp.RequestCtx) []string {
		var keys []string
		for k := range ctx.Request.Header.All() {
			keys = append(keys, string(k))
		}
		slices.Sort(keys)
		return slices.Compact(keys)
	}
	var ctx fasthttp.RequestCtx
	set(&ctx)
	if u, err := on.Authenticate(&ctx); err != nil || u.GetName() != "system:anonymous" {
		t.Fatalf("got %v, %v", u, err)
	}
	// X-Remote-Group is not a configured header here.
	if got, want := left(&ctx), []string{"X-Other", "X-Remote-Group"}; !slices.Equal(got, want) {
		t.Errorf("headers left %v, want %v", got, want)
	}
	ctx.Request.Header.Reset()
	set(&ctx)
	if _, err := off.Authenticate(&ctx); err != nil {
		t.Fatal(err)
	}
	if got := left(&ctx); len(got) != 7 {
		t.Errorf("request-header off: headers left %v, want all seven", got)
	}
	// The shells are reused: a later request sees none of the headers of
	// an earlier one.
	for range 3 {
		ctx.Request.Header.Reset()
		if u, err := on.Authenticate(&ctx); err != nil || u.GetName() != "system:anonymous" {
			t.Fatalf("got %v, %v", u, err)
		}
	}
}

func TestNewRequestHeader(t *testing.T) {
	ca := newTestCA(t, "ca")
	caFile := writeFile(t, "ca.crt", pemOf(ca.cert))
	f := func(name string, rh RequestHeaderConfig, wantErr string) {
		t.Run(name, func(t *testing.T) {
			_, err := New(Config{RequestHeader: rh})
			if wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("err = %v; want ErrInvalidConfig with %q", err, wantErr)
			}
		})
	}
	f("request-header only", RequestHeaderConfig{ClientCAFile: caFile}, "")
	f("all headers", RequestHeaderConfig{ClientCAFile: caFile, AllowedNames: []string{"p"}, UsernameHeaders: []string{" X-U "},
		UIDHeaders: []string{"X-Uid"}, GroupHeaders: []string{"X-G1", "X-G2"}, ExtraHeaderPrefixes: []string{"X-E-"}}, "")
	f("missing CA file", RequestHeaderConfig{ClientCAFile: filepath.Join(t.TempDir(), "missing")}, "cannot read request-header client CA file")
	f("CA file without certificates", RequestHeaderConfig{ClientCAFile: writeFile(t, "x", "nope")}, "cannot parse request-header client CA file")
	f("empty header", RequestHeaderConfig{ClientCAFile: caFile, GroupHeaders: []string{"X-G", " "}}, "group headers: empty header name")
	f("bad header", RequestHeaderConfig{ClientCAFile: caFile, UsernameHeaders: []string{"X User"}}, `"X User" is not a header name`)
	f("headers without CA", RequestHeaderConfig{UsernameHeaders: []string{"X-U"}}, "no authentication method")
}

// TestRequestHeaderCache: the proxy's verified chain is cached, nothing
// else: each request's user comes from its own headers, and a chain that
// is not the cached one is verified (and rejected) on its own, whatever
// its CN.
func TestRequestHeaderCache(t *testing.T) {
	proxyCA := newTestCA(t, "front-proxy-ca")
	rh, _, err := newRequestHeader(RequestHeaderConfig{
		ClientCAFile: writeFile(t, "ca.crt", pemOf(proxyCA.cert)), AllowedNames: []string{"front-proxy"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cache := rh.(*proxyAuth).proxy.(*certCache)
	verify := cache.auth
	var verified int
	cache.auth = authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		verified++
		return verify.AuthenticateRequest(req)
	})

	proxy := proxyCA.issue(t, "front-proxy", nil, x509.ExtKeyUsageClientAuth, nil).Leaf
	expired := proxyCA.issue(t, "front-proxy", nil, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Minute)
	}).Leaf
	// Another key, from a CA with the same name but not the CA's key.
	rogue := newTestCA(t, "front-proxy-ca").issue(t, "front-proxy", nil, x509.ExtKeyUsageClientAuth, nil).Leaf
	intruder := proxyCA.issue(t, "intruder", nil, x509.ExtKeyUsageClientAuth, nil).Leaf

	type want struct {
		name   string // "": not authenticated
		groups []string
		err    bool
		verify bool // the chain is verified, not found in the cache
	}
	f := func(step string, peers []*x509.Certificate, headers http.Header, w want) {
		t.Helper()
		before := verified
		req := &http.Request{Header: headers.Clone(), TLS: &tls.ConnectionState{PeerCertificates: peers}}
		resp, ok, err := rh.AuthenticateRequest(req)
		if (err != nil) != w.err || ok != (w.name != "") {
			t.Fatalf("%s: ok=%v err=%v; want %+v", step, ok, err, w)
		}
		if ok && (resp.User.GetName() != w.name || !slices.Equal(resp.User.GetGroups(), w.groups)) {
			t.Errorf("%s: user %q %v; want %q %v", step, resp.User.GetName(), resp.User.GetGroups(), w.name, w.groups)
		}
		if ok && (req.Header.Get("X-Remote-User") != "" || req.Header.Get("X-Remote-Group") != "") {
			t.Errorf("%s: identity headers left: %v", step, req.Header)
		}
		if v := verified > before; v != w.verify {
			t.Errorf("%s: chain verified = %v, want %v", step, v, w.verify)
		}
	}
	user := func(name string, groups ...string) http.Header {
		h := http.Header{"X-Remote-User": {name}}
		if len(groups) > 0 {
			h["X-Remote-Group"] = groups
		}
		return h
	}
	one := []*x509.Certificate{proxy}
	f("first request", one, user("jane", "dev"), want{name: "jane", groups: []string{"dev"}, verify: true})
	f("second request: its own user", one, user("bob", "ops"), want{name: "bob", groups: []string{"ops"}})
	f("third request: no groups", one, user("carl"), want{name: "carl", groups: []string{}})
	f("no username header", one, http.Header{"X-Remote-Group": {"dev"}}, want{})
	f("expired, same CN", []*x509.Certificate{expired}, user("jane"), want{err: true, verify: true})
	f("another key, same CN and issuer name", []*x509.Certificate{rogue}, user("jane"), want{err: true, verify: true})
	f("the rogue again: rejections not cached", []*x509.Certificate{rogue}, user("jane"), want{err: true, verify: true})
	f("the proxy's leaf after the rogue's", []*x509.Certificate{rogue, proxy}, user("jane"), want{err: true, verify: true})
	f("CN not allowed", []*x509.Certificate{intruder}, user("jane"), want{err: true, verify: true})
	f("no certificate", nil, user("jane"), want{})
	f("the proxy, still cached", one, user("dana", "a", "b"), want{name: "dana", groups: []string{"a", "b"}})
	if len(cache.entries) != 1 {
		t.Errorf("%d cached chains, want the proxy's only", len(cache.entries))
	}
}
