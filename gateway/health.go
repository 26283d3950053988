package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/healthz"
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
const HealthCheckTimeout = healthz.Timeout

// check is one health check.
type check = healthz.Check

// readyChecks are the checks of /readyz and /healthz; /livez runs the
// first, ping.
func (g *Gateway) readyChecks() []check {
	rd := readiness.New(g.d.Backend.Ranges.Current())
	return []check{
		{Name: "ping", Run: func(context.Context) error { return nil }},
		{Name: "etcd", Run: func(ctx context.Context) error { _, err := g.d.Backend.Revisions.Current(ctx); return err }},
		{Name: "cachenode", Run: func(ctx context.Context) error { return rd.Check(ctx, g.d.Backend.Ranges.Current(), g.c.Router.Ready) }},
		{Name: "nats", Run: func(context.Context) error {
			if !g.d.NATS.IsConnected() {
				return fmt.Errorf("not connected")
			}
			return nil
		}},
		{Name: "rbac", Run: g.c.Access.Ready},
		{Name: "node-authorizer", Run: g.c.Access.NodeReady},
		{Name: "shutdown", Run: func(context.Context) error {
			if g.stopping.Load() {
				return errShuttingDown
			}
			return g.c.Stopping()
		}},
	}
}

// health serves /livez, /healthz and /readyz with the gateway's checks.
func (g *Gateway) health(rc *fasthttp.RequestCtx, path string) error {
	if err := healthz.Serve(rc, path, g.checks); err != nil {
		return rest.ErrNotFoundPath
	}
	return nil
}
