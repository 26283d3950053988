package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/readiness"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/rest"
)

// healthRoots are the health endpoints; each also serves its checks one
// by one at <root>/<check>.
var healthRoots = []string{"/livez", "/healthz", "/readyz"}

func isHealthPath(path string) bool {
	for _, r := range healthRoots {
		if path == r || (strings.HasPrefix(path, r) && path[len(r)] == '/') {
			return true
		}
	}
	return false
}

// anonymous is who a health probe without valid credentials is, for the
// audit log: probes are answered without authentication, so that
// kubelets and load balancers need none.
var anonymous = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

// serveHealth answers a health probe. Probes need no credentials (load
// balancers and kubelets probe without any), but they are audited like
// any request, as the user their credentials name or as
// system:anonymous.
func (g *Gateway) serveHealth(rc *fasthttp.RequestCtx, info *requestinfo.Info, path string) error {
	u, err := g.authn.Authenticate(rc)
	if err != nil {
		u = anonymous
	}
	if err := requestinfo.Parse(info, string(rc.Method()), path, rc.QueryArgs()); err != nil {
		return rest.ErrNotFoundPath
	}
	g.guard.Audit(rc, info, u)
	if !rc.IsGet() && !rc.IsHead() {
		return apierror.MethodNotSupported(schema.GroupResource{}, string(rc.Method()))
	}
	return g.health(rc, path)
}

// errShuttingDown fails the shutdown check once the gateway's shutdown
// has started (its delay included), as kube-apiserver's readyz does.
var errShuttingDown = errors.New("process is shutting down")

// HealthCheckTimeout bounds the checks of one /livez, /readyz or /healthz
// request: a probe's timeout must be longer.
const HealthCheckTimeout = 5 * time.Second

// check is one health check.
type check struct {
	name string
	run  func(context.Context) error
}

// readyChecks are the checks of /readyz and /healthz; /livez runs the
// first, ping.
func (g *Gateway) readyChecks() []check {
	rd := readiness.New(g.d.Backend.Ranges.Current())
	return []check{
		{"ping", func(context.Context) error { return nil }},
		{"etcd", func(ctx context.Context) error { _, err := g.d.Backend.Revisions.Current(ctx); return err }},
		{"cachenode", func(ctx context.Context) error { return rd.Check(ctx, g.d.Backend.Ranges.Current(), g.c.Router.Ready) }},
		{"nats", func(context.Context) error {
			if !g.d.NATS.IsConnected() {
				return fmt.Errorf("not connected")
			}
			return nil
		}},
		{"rbac", g.c.Access.Ready},
		{"shutdown", func(context.Context) error {
			if g.stopping.Load() {
				return errShuttingDown
			}
			return g.c.Stopping()
		}},
	}
}

// health serves /livez, /healthz and /readyz as kube-apiserver does: "ok"
// or 500 with the failed checks; ?verbose lists every check, ?exclude=
// skips one; <root>/<check> runs one check.
func (g *Gateway) health(rc *fasthttp.RequestCtx, path string) error {
	checks := slices.Clone(g.checks) // ?exclude deletes in place
	if path == "/livez" {
		checks = checks[:1]
	}
	root, only, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	path = "/" + root
	if only != "" {
		i := slices.IndexFunc(checks, func(c check) bool { return c.name == only })
		if i < 0 {
			return rest.ErrNotFoundPath
		}
		checks = checks[i : i+1]
	}
	for _, ex := range rc.QueryArgs().PeekMulti("exclude") {
		checks = slices.DeleteFunc(checks, func(c check) bool { return c.name == string(ex) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if err := c.run(ctx); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	verbose := rc.QueryArgs().Has("verbose")
	rc.SetContentType("text/plain; charset=utf-8")
	rc.Response.Header.Set("X-Content-Type-Options", "nosniff")
	if failed {
		rc.SetStatusCode(fasthttp.StatusInternalServerError)
		if only != "" {
			rc.SetBodyString("internal server error: " + strings.TrimPrefix(b.String(), "[-]"))
			return nil
		}
		fmt.Fprintf(&b, "%s check failed\n", root)
		rc.SetBodyString(b.String())
		return nil
	}
	if verbose {
		fmt.Fprintf(&b, "%s check passed\n", root)
		rc.SetBodyString(b.String())
		return nil
	}
	rc.SetBodyString("ok")
	return nil
}
