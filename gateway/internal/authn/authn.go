// Package authn authenticates the gateway's requests the way kube-apiserver
// does, with k8s.io/apiserver's own authenticators: front proxies' identity
// headers (--requestheader-*), x509 client certificates (--client-ca-file),
// static bearer tokens (--token-auth-file), further token authenticators
// (service-account JWTs, gateway/internal/satoken; OIDC, gateway/internal/
// oidc) and, when enabled, anonymous requests. Those authenticators take an
// *http.Request, so each fasthttp request is presented to them as a minimal
// one (method, path, Authorization header, the identity headers when
// request-header authentication is on, TLS state; never the body).
package authn

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/valyala/fasthttp"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	certutil "k8s.io/client-go/util/cert"
)

// Errors returned by New and Authenticate.
var (
	// ErrUnauthorized: the request has bad credentials, or none while
	// anonymous requests are disabled. It becomes a 401; the wrapped
	// reason is for logs, not for the client.
	ErrUnauthorized = errors.New("authn: unauthorized")
	// ErrInvalidConfig: Config is missing a field or has a bad value.
	ErrInvalidConfig = errors.New("authn: invalid config")
)

// Config selects the authentication methods, as kube-apiserver's flags do.
type Config struct {
	// ClientCAFile is a PEM bundle of CAs; a client certificate that chains
	// to one of them (client-auth usage) authenticates as user = CN,
	// groups = O. Like --client-ca-file. Read once, in New.
	ClientCAFile string
	// TokenAuthFile is a CSV file of static bearer tokens,
	// `token,user,uid,"group1,group2"`. Like --token-auth-file. Read once,
	// in New.
	TokenAuthFile string
	// Anonymous lets requests without credentials through as
	// system:anonymous (group system:unauthenticated). Requests with bad
	// credentials are rejected either way. Like --anonymous-auth.
	Anonymous bool
	// Logger receives a debug record per rejected request. Default: discard.
	Logger *slog.Logger
	// APIAudiences are the audiences of the API (--api-audiences): a
	// TokenReview asking for other audiences does not accept static
	// tokens. Optional.
	APIAudiences []string
	// Tokens are further bearer-token authenticators, asked after the
	// token file in order (service-account JWTs, OIDC). Like the token
	// file they answer (nil, false, nil) for a token that is not theirs.
	Tokens []authenticator.Token
	// RequestHeader authenticates front proxies' requests by headers,
	// first in the chain; off without RequestHeader.ClientCAFile.
	RequestHeader RequestHeaderConfig
}

// Authenticator authenticates fasthttp requests. It is safe for concurrent
// use.
type Authenticator struct {
	auth authenticator.Request
	log  *slog.Logger
	// headers are the front-proxy identity headers; nil when
	// request-header authentication is off.
	headers *identityHeaders
	// requests recycles the *http.Request shells handed to the
	// authenticators; none of them keeps the request after returning.
	requests sync.Pool
}

// New reads the configured files and builds the authenticator chain in
// kube-apiserver's order: request headers, x509, then bearer tokens, then
// (if enabled) anonymous; authenticated users get the group
// system:authenticated.
func New(cfg Config) (*Authenticator, error) {
	if cfg.ClientCAFile == "" && cfg.TokenAuthFile == "" && len(cfg.Tokens) == 0 && !cfg.Anonymous && cfg.RequestHeader.ClientCAFile == "" {
		return nil, fmt.Errorf("%w: no authentication method (client CA file, token file, bearer-token authenticators, request-header CA file or anonymous)", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var chain []authenticator.Request
	var headers *identityHeaders
	if cfg.RequestHeader.ClientCAFile != "" {
		rh, h, err := newRequestHeader(cfg.RequestHeader)
		if err != nil {
			return nil, err
		}
		if len(cfg.APIAudiences) > 0 {
			rh = authenticator.WrapAudienceAgnosticRequest(cfg.APIAudiences, rh)
		}
		chain, headers = append(chain, rh), h
	}
	if cfg.ClientCAFile != "" {
		x, err := newX509(cfg.ClientCAFile)
		if err != nil {
			return nil, err
		}
		chain = append(chain, x)
	}
	var tokens []authenticator.Token
	if cfg.TokenAuthFile != "" {
		file, err := tokenfile.NewCSV(cfg.TokenAuthFile)
		if err != nil {
			return nil, fmt.Errorf("%w: cannot load token file: %w", ErrInvalidConfig, err)
		}
		if len(cfg.APIAudiences) > 0 {
			tokens = append(tokens, authenticator.WrapAudienceAgnosticToken(cfg.APIAudiences, file))
		} else {
			tokens = append(tokens, file)
		}
	}
	tokens = append(tokens, cfg.Tokens...)
	switch len(tokens) {
	case 0:
	case 1:
		chain = append(chain, bearertoken.New(tokens[0]))
	default:
		chain = append(chain, bearertoken.New(tokenunion.New(tokens...)))
	}
	// The same composition as k8s.io/apiserver's authenticatorfactory:
	// any failing method fails the request, so bad credentials are never
	// downgraded to anonymous.
	var auth authenticator.Request = group.NewAuthenticatedGroupAdder(union.New(chain...))
	if len(chain) == 0 {
		auth = nil
	}
	if cfg.Anonymous {
		anon := anonymous.NewAuthenticator(nil)
		if auth == nil {
			auth = anon
		} else {
			auth = union.NewFailOnError(auth, anon)
		}
	}
	a := &Authenticator{auth: auth, log: cfg.Logger, headers: headers}
	a.requests.New = func() any { return newRequest() }
	return a, nil
}

// newX509 is the client certificate authenticator for the CAs in caFile.
func newX509(caFile string) (authenticator.Request, error) {
	certs, err := readCAFile(caFile, "client CA file")
	if err != nil {
		return nil, err
	}
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = x509CertPool(certs)
	return newCertCache(x509request.New(opts, x509request.CommonNameUserConversion)), nil
}

// readCAFile reads a PEM bundle of CA certificates.
func readCAFile(file, what string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read %s: %w", ErrInvalidConfig, what, err)
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse %s %s: %w", ErrInvalidConfig, what, file, err)
	}
	return certs, nil
}

// Authenticate returns the user who sent the request, or an error wrapping
// ErrUnauthorized. On success the Authorization header is removed from the
// request, as kube-apiserver does, so that nothing later forwards it; the
// front-proxy identity headers are removed whatever the outcome, so that
// a client's own cannot reach anything after authentication.
// The returned user.Info may be shared between requests: do not modify it.
func (a *Authenticator) Authenticate(ctx *fasthttp.RequestCtx) (user.Info, error) {
	r := a.requests.Get().(*request)
	defer a.requests.Put(r)
	req := r.fill(ctx, a.headers)
	defer r.reset()

	resp, ok, err := a.auth.AuthenticateRequest(req)
	if a.headers != nil {
		r.keys = a.headers.strip(&ctx.Request.Header, r.keys)
	}
	switch {
	case err != nil:
		err = fmt.Errorf("%w: %w", ErrUnauthorized, err)
	case !ok || resp == nil || resp.User == nil:
		err = fmt.Errorf("%w: %w", ErrUnauthorized, errNoCredentials)
	default:
		ctx.Request.Header.Del(fasthttp.HeaderAuthorization)
		return resp.User, nil
	}
	if a.log.Enabled(context.Background(), slog.LevelDebug) {
		a.log.Debug("request not authenticated", "remote", ctx.RemoteAddr().String(), "error", err)
	}
	return nil, err
}

// AuthenticateToken authenticates a bearer token as a request carrying
// only it would be (TokenReview): ctx may carry the audiences asked for
// (authenticator.WithAudiences).
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	req := (&http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: "/"}, ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{fasthttp.HeaderAuthorization: {"Bearer " + token}},
	}).WithContext(ctx)
	return a.auth.AuthenticateRequest(req)
}

// errNoCredentials: neither a client certificate nor a bearer token.
var errNoCredentials = errors.New("no credentials")

// request is a reusable *http.Request shell: only the fields the
// authenticators read are set.
type request struct {
	req    http.Request
	url    url.URL
	header http.Header
	// auth backs the Authorization header value without a slice allocation.
	auth [1]string
	// keys is scratch space for the identity headers to strip.
	keys []string
}

func newRequest() *request {
	return &request{header: make(http.Header, 1)}
}

// fill makes r describe ctx's request and returns it, with the identity
// headers h (if not nil). Strings are copied: an authenticator may keep
// one in an error it returns.
func (r *request) fill(ctx *fasthttp.RequestCtx, h *identityHeaders) *http.Request {
	r.url.Path = string(ctx.Path())
	r.req.Method = method(ctx.Method())
	r.req.URL = &r.url
	r.req.Header = r.header
	r.req.ProtoMajor, r.req.ProtoMinor = 1, 1
	if v := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization); len(v) > 0 {
		r.auth[0] = string(v)
		r.header[fasthttp.HeaderAuthorization] = r.auth[:]
	}
	if h != nil {
		h.copy(&ctx.Request.Header, r.header)
	}
	r.req.TLS = ctx.TLSConnectionState()
	return &r.req
}

// reset drops every reference r holds to the last request.
func (r *request) reset() {
	clear(r.header)
	r.auth[0] = ""
	r.url = url.URL{}
	r.req = http.Request{}
}

// method returns m as a string, without allocating for the usual methods.
func method(m []byte) string {
	switch string(m) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodPatch:
		return http.MethodPatch
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodHead:
		return http.MethodHead
	case http.MethodOptions:
		return http.MethodOptions
	}
	return string(m)
}

// x509CertPool is a pool of certs.
func x509CertPool(certs []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}
