package authn

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
)

// Defaults of RequestHeaderConfig: the headers kube-apiserver's
// aggregation layer and most front proxies send.
var (
	DefaultUsernameHeaders     = []string{"X-Remote-User"}
	DefaultGroupHeaders        = []string{"X-Remote-Group"}
	DefaultExtraHeaderPrefixes = []string{"X-Remote-Extra-"}
)

// RequestHeaderConfig trusts the identity a front proxy puts in request
// headers, as kube-apiserver's --requestheader-* flags: the proxy presents
// a client certificate signed by a CA of ClientCAFile (and, when
// AllowedNames is not empty, with one of them as its CN); the user is then
// the first non-empty username header, with the UID, groups and extra
// the other headers carry.
type RequestHeaderConfig struct {
	// ClientCAFile (--requestheader-client-ca-file) turns request-header
	// authentication on. Read once, in New.
	ClientCAFile string
	// AllowedNames (--requestheader-allowed-names) are the proxy
	// certificate CNs allowed; empty allows any CN signed by the CA.
	AllowedNames []string
	// UsernameHeaders (--requestheader-username-headers) default to
	// X-Remote-User; UIDHeaders (--requestheader-uid-headers) to none.
	UsernameHeaders []string
	UIDHeaders      []string
	// GroupHeaders (--requestheader-group-headers) default to
	// X-Remote-Group; every value of every one is a group.
	GroupHeaders []string
	// ExtraHeaderPrefixes (--requestheader-extra-headers-prefix) default
	// to X-Remote-Extra-: X-Remote-Extra-Scopes: a is extra "scopes": [a].
	ExtraHeaderPrefixes []string
}

// identityHeaders are the headers a front proxy sets: those the
// authenticator reads and the gateway strips from every request.
type identityHeaders struct {
	names    [][]byte // header names
	prefixes [][]byte // header name prefixes
}

// newRequestHeader is the front-proxy authenticator and the headers it
// reads.
func newRequestHeader(cfg RequestHeaderConfig) (authenticator.Request, *identityHeaders, error) {
	certs, err := readCAFile(cfg.ClientCAFile, "request-header client CA file")
	if err != nil {
		return nil, nil, err
	}
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = x509CertPool(certs)
	if cfg.UsernameHeaders, err = headerNames("username headers", cfg.UsernameHeaders, DefaultUsernameHeaders); err != nil {
		return nil, nil, err
	}
	if cfg.UIDHeaders, err = headerNames("UID headers", cfg.UIDHeaders, nil); err != nil {
		return nil, nil, err
	}
	if cfg.GroupHeaders, err = headerNames("group headers", cfg.GroupHeaders, DefaultGroupHeaders); err != nil {
		return nil, nil, err
	}
	if cfg.ExtraHeaderPrefixes, err = headerNames("extra header prefixes", cfg.ExtraHeaderPrefixes, DefaultExtraHeaderPrefixes); err != nil {
		return nil, nil, err
	}
	h := &identityHeaders{}
	for _, name := range slices.Concat(cfg.UsernameHeaders, cfg.UIDHeaders, cfg.GroupHeaders) {
		h.names = append(h.names, []byte(name))
	}
	for _, prefix := range cfg.ExtraHeaderPrefixes {
		h.prefixes = append(h.prefixes, []byte(prefix))
	}
	// headerrequest.NewDynamicVerifyOptionsSecure in two halves, so that
	// the certificate half can be cached: the same x509 verifier, handing
	// a verified, allowed chain to an authenticator that only says so.
	verified := &authenticator.Response{}
	proxy := x509request.NewDynamicCAVerifier(
		x509request.StaticVerifierFn(opts),
		authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) { return verified, true, nil }),
		headerrequest.StaticStringSlice(cfg.AllowedNames),
	)
	auth := &proxyAuth{
		proxy: newCertCache(proxy),
		headers: headerrequest.NewDynamic(
			headerrequest.StaticStringSlice(cfg.UsernameHeaders),
			headerrequest.StaticStringSlice(cfg.UIDHeaders),
			headerrequest.StaticStringSlice(cfg.GroupHeaders),
			headerrequest.StaticStringSlice(cfg.ExtraHeaderPrefixes),
		),
	}
	return auth, h, nil
}

// headerNames returns names (def if empty) trimmed, or an error naming
// the list (what) if one is not a header name.
func headerNames(what string, names, def []string) ([]string, error) {
	if len(names) == 0 {
		return def, nil
	}
	out := make([]string, 0, len(names))
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%w: request-header %s: empty header name", ErrInvalidConfig, what)
		}
		if strings.ContainsAny(name, " \t\r\n:") {
			return nil, fmt.Errorf("%w: request-header %s: %q is not a header name", ErrInvalidConfig, what, name)
		}
		out = append(out, name)
	}
	return out, nil
}

// proxyAuth is upstream's request-header authenticator with the proxy's
// certificate check cached: a request is the proxy's when its client
// certificate chain verifies against the request-header CA for client
// auth and has an allowed CN, which depends on the chain alone, so
// certCache remembers it per chain (not the user, which each request's
// headers carry). Its answers are upstream's: no certificate, no opinion;
// a rejected certificate, its error; a proxy's request without a username
// header, no opinion; else the user of the headers.
type proxyAuth struct {
	proxy   authenticator.Request // the cached certificate check
	headers authenticator.Request // reads (and clears) the identity headers
}

// AuthenticateRequest implements authenticator.Request.
func (p *proxyAuth) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if _, ok, err := p.proxy.AuthenticateRequest(req); !ok || err != nil {
		return nil, false, err
	}
	return p.headers.AuthenticateRequest(req)
}

// match reports whether key is one of the identity headers.
func (h *identityHeaders) match(key []byte) bool {
	for _, n := range h.names {
		if len(key) == len(n) && bytes.EqualFold(key, n) {
			return true
		}
	}
	for _, p := range h.prefixes {
		if len(key) >= len(p) && bytes.EqualFold(key[:len(p)], p) {
			return true
		}
	}
	return false
}

// copy adds the identity headers of fh to the shell's header h, under
// their canonical names, every value kept.
func (h *identityHeaders) copy(fh *fasthttp.RequestHeader, dst http.Header) {
	for k, v := range fh.All() {
		if h.match(k) {
			key := http.CanonicalHeaderKey(string(k))
			dst[key] = append(dst[key], string(v))
		}
	}
}

// strip deletes the identity headers from fh, so that nothing after
// authentication (or forwarded by the gateway) sees a client's claim to be
// someone else. keys is scratch space; strip returns it for reuse.
func (h *identityHeaders) strip(fh *fasthttp.RequestHeader, keys []string) []string {
	keys = keys[:0]
	for k := range fh.All() {
		if h.match(k) {
			keys = append(keys, string(k))
		}
	}
	for _, k := range keys {
		fh.Del(k)
	}
	clear(keys)
	return keys[:0]
}
