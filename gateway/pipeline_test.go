package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authn"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/reqmetrics"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// steps records what the fakes were asked, in order.
type steps struct{ got []string }

func (s *steps) add(step string) { s.got = append(s.got, step) }

// fakes implements every step of the pipeline; each err field, when set,
// is what that step returns.
type fakes struct {
	*steps
	authnErr, admitErr, authzErr, serveErr error
	review                                 bool
	panicIn                                string
}

func (f *fakes) Authenticate(*fasthttp.RequestCtx) (user.Info, error) {
	f.add("authn")
	if f.authnErr != nil {
		return nil, f.authnErr
	}
	return &user.DefaultInfo{Name: "alice"}, nil
}

func (f *fakes) Audit(_ *fasthttp.RequestCtx, _ *requestinfo.Info, u user.Info) {
	f.add("audit " + u.GetName())
}
func (f *fakes) Unauthenticated(*fasthttp.RequestCtx, *requestinfo.Info) { f.add("unauthenticated") }
func (f *fakes) Panic(*fasthttp.RequestCtx)                              { f.add("panic") }
func (f *fakes) Finish(*fasthttp.RequestCtx, *requestinfo.Info)          { f.add("finish") }

func (f *fakes) Admit(_ *fasthttp.RequestCtx, _ *requestinfo.Info, _ user.Info, next func() error) error {
	f.add("admit")
	if f.admitErr != nil {
		return f.admitErr
	}
	return next()
}

func (f *fakes) Authorize(*fasthttp.RequestCtx, *requestinfo.Info, user.Info) error {
	f.add("authorize")
	return f.authzErr
}

func (f *fakes) Serves(*requestinfo.Info) bool { return f.review }

func (f *fakes) ServeReview(rc *fasthttp.RequestCtx, _ *requestinfo.Info, res *registry.Resource) error {
	f.add("review " + res.Resource)
	return f.serveErr
}

func (f *fakes) Serve(rc *fasthttp.RequestCtx, _ *requestinfo.Info, res *registry.Resource) error {
	f.add("serve " + res.Resource)
	if f.panicIn == "serve" {
		panic("bug")
	}
	if f.serveErr != nil {
		return f.serveErr
	}
	rc.SetBodyString("served")
	return nil
}

// newTestGateway is a gateway whose pipeline steps are f and whose
// health checks are checks.
func newTestGateway(t *testing.T, f *fakes, checks ...check) *Gateway {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	codec, err := negotiate.NewCodec(reg.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheus.NewRegistry()
	m, err := reqmetrics.New(prom, prom)
	if err != nil {
		t.Fatal(err)
	}
	return &Gateway{
		log: slog.New(slog.DiscardHandler), reg: reg, codec: codec, metrics: m,
		authn: f, guard: f, authz: f, reviews: f, rest: f, checks: checks,
		cfg: Config{MaxRequestBodyBytes: DefaultMaxRequestBodyBytes},
	}
}

func request(g *Gateway, method, uri string) *fasthttp.RequestCtx {
	rc := &fasthttp.RequestCtx{}
	rc.Request.Header.SetMethod(method)
	rc.Request.SetRequestURI(uri)
	g.handle(rc)
	return rc
}

func status(t *testing.T, rc *fasthttp.RequestCtx) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(rc.Response.Body(), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("body %q is not a Status: %v", rc.Response.Body(), err)
	}
	return st
}

// TestPipeline: authentication, then audit and fairness, impersonation
// and authorization, then the handler; the first error stops the request
// and becomes a Status through the one adapter; Finish always runs.
func TestPipeline(t *testing.T) {
	const pods = "/api/v1/namespaces/ns/pods"
	cases := []struct {
		name   string
		f      fakes
		method string
		uri    string
		want   []string
		code   int
		reason metav1.StatusReason
	}{
		{name: "served", uri: pods, want: []string{"authn", "admit", "authorize", "serve pods", "finish"}, code: 200},
		{name: "unauthenticated", f: fakes{authnErr: authn.ErrUnauthorized}, uri: pods,
			want: []string{"authn", "unauthenticated", "finish"}, code: 401, reason: metav1.StatusReasonUnauthorized},
		{name: "authenticator failed", f: fakes{authnErr: errors.New("boom")}, uri: pods,
			want: []string{"authn", "finish"}, code: 500, reason: metav1.StatusReasonInternalError},
		{name: "over the limits", f: fakes{admitErr: apierror.TooManyRequests("slow down", 3)}, uri: pods,
			want: []string{"authn", "admit", "finish"}, code: 429, reason: metav1.StatusReasonTooManyRequests},
		{name: "forbidden", f: fakes{authzErr: apierror.Forbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))}, uri: pods,
			want: []string{"authn", "admit", "authorize", "finish"}, code: 403, reason: metav1.StatusReasonForbidden},
		{name: "storage error", f: fakes{serveErr: storage.ErrNotFound}, uri: pods + "/p",
			want: []string{"authn", "admit", "authorize", "serve pods", "finish"}, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "review API", f: fakes{review: true}, method: "POST", uri: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
			want: []string{"authn", "admit", "authorize", "review selfsubjectreviews", "finish"}, code: 200},
		{name: "unknown resource", uri: "/api/v1/nothings",
			want: []string{"authn", "admit", "authorize", "finish"}, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "panic", f: fakes{panicIn: "serve"}, uri: pods,
			want: []string{"authn", "admit", "authorize", "serve pods", "panic", "finish"}, code: 500, reason: metav1.StatusReasonInternalError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			f.steps = &steps{}
			g := newTestGateway(t, &f)
			method := c.method
			if method == "" {
				method = "GET"
			}
			rc := request(g, method, c.uri)
			if strings.Join(f.got, ", ") != strings.Join(c.want, ", ") {
				t.Errorf("steps %q, want %q", f.got, c.want)
			}
			if rc.Response.StatusCode() != c.code {
				t.Errorf("code %d, want %d (body %q)", rc.Response.StatusCode(), c.code, rc.Response.Body())
			}
			if len(rc.Response.Header.Peek(HeaderAuditID)) == 0 {
				t.Error("no audit ID on the response")
			}
			if c.code == 200 {
				return
			}
			st := status(t, rc)
			if st.Code != int32(c.code) || st.Reason != c.reason {
				t.Errorf("Status %d %q, want %d %q", st.Code, st.Reason, c.code, c.reason)
			}
			if c.code == 429 && string(rc.Response.Header.Peek("Retry-After")) != "3" {
				t.Errorf("Retry-After %q, want 3", rc.Response.Header.Peek("Retry-After"))
			}
		})
	}
}

// TestHealth: probes need no credentials (audited as system:anonymous
// without them), /livez runs only ping, a failed check is 500 listing
// it, one check runs alone at <root>/<check>, ?exclude skips one.
func TestHealth(t *testing.T) {
	ok := func(context.Context) error { return nil }
	bad := func(context.Context) error { return errors.New("down") }
	checks := []check{{Name: "ping", Run: ok}, {Name: "etcd", Run: ok}, {Name: "cachenode", Run: bad}}
	cases := []struct {
		name     string
		authnErr error
		method   string
		uri      string
		code     int
		body     string
		audited  string
	}{
		{name: "livez", uri: "/livez", code: 200, body: "ok", audited: "audit alice"},
		{name: "anonymous", authnErr: authn.ErrUnauthorized, uri: "/livez", code: 200, body: "ok", audited: "audit system:anonymous"},
		{name: "readyz fails", uri: "/readyz", code: 500, body: "[+]ping ok\n[+]etcd ok\n[-]cachenode failed: down\nreadyz check failed\n", audited: "audit alice"},
		{name: "excluded", uri: "/readyz?exclude=cachenode&verbose", code: 200, body: "[+]ping ok\n[+]etcd ok\nreadyz check passed\n", audited: "audit alice"},
		{name: "one check", uri: "/healthz/etcd", code: 200, body: "ok", audited: "audit alice"},
		{name: "excluded again", uri: "/readyz?exclude=etcd&verbose", code: 500, body: "[+]ping ok\n[-]cachenode failed: down\nreadyz check failed\n", audited: "audit alice"},
		{name: "one failing check", uri: "/readyz/cachenode", code: 500, body: "internal server error: cachenode failed: down\n", audited: "audit alice"},
		{name: "unknown check", uri: "/readyz/nothing", code: 404, audited: "audit alice"},
		{name: "not a GET", method: "POST", uri: "/readyz", code: 405, audited: "audit alice"},
	}
	g := newTestGateway(t, &fakes{}, checks...) // one gateway: requests must not change its checks
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakes{steps: &steps{}, authnErr: c.authnErr}
			g.authn, g.guard = f, f
			method := c.method
			if method == "" {
				method = "GET"
			}
			rc := request(g, method, c.uri)
			if rc.Response.StatusCode() != c.code {
				t.Fatalf("code %d, want %d (body %q)", rc.Response.StatusCode(), c.code, rc.Response.Body())
			}
			if c.body != "" && string(rc.Response.Body()) != c.body {
				t.Errorf("body %q, want %q", rc.Response.Body(), c.body)
			}
			want := []string{"authn", c.audited, "finish"}
			if strings.Join(f.got, ", ") != strings.Join(want, ", ") {
				t.Errorf("steps %q, want %q", f.got, want)
			}
		})
	}
}

// TestReadError: a body over the limit is 413, anything else fasthttp
// cannot read 400, both as a Status.
func TestReadError(t *testing.T) {
	g := newTestGateway(t, &fakes{steps: &steps{}})
	rc := &fasthttp.RequestCtx{}
	g.readError(rc, errors.New("malformed"))
	if st := status(t, rc); st.Code != 400 || st.Reason != metav1.StatusReasonBadRequest {
		t.Fatalf("Status %d %q, want 400 BadRequest", st.Code, st.Reason)
	}
}
