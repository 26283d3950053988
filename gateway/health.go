package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/rest"
	"github.com/kgate/kgate/storage/ranges"
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
	rd := newReadiness(g.d.Backend.Ranges.Current())
	return []check{
		{"ping", func(context.Context) error { return nil }},
		{"etcd", func(ctx context.Context) error { _, err := g.d.Backend.Revisions.Current(ctx); return err }},
		{"cachenode", func(ctx context.Context) error { return rd.check(ctx, g.d.Backend.Ranges.Current(), g.router.Ready) }},
		{"nats", func(context.Context) error {
			if !g.d.NATS.IsConnected() {
				return fmt.Errorf("not connected")
			}
			return nil
		}},
		{"rbac", g.access.Ready},
		{"shutdown", func(context.Context) error {
			if g.stopping.Load() {
				return errShuttingDown
			}
			return g.base.Err()
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
	ctx, cancel := context.WithTimeout(context.Background(), HealthCheckTimeout)
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

// readiness is what /readyz asks of the cache nodes: a ready replica for
// each range of the table the gateway started with, and for each range
// added since once it had one. A range added at run time (a new custom
// resource) is not required while its cache nodes first sync it: the
// gateway stays ready, and only the new resource's reads wait (503)
// meanwhile. Serving, unlike readiness, asks for every current range.
type readiness struct {
	mu sync.Mutex // guards required
	// required are the ranges the gateway must serve to be ready, by
	// their *Range (a range removed and added again is a new one).
	required map[*ranges.Range]bool
}

func newReadiness(start *ranges.Table) *readiness {
	r := &readiness{required: map[*ranges.Range]bool{}}
	for _, rng := range start.All() {
		r.required[rng] = true
	}
	return r
}

// check asks ready (the router's Ready) for the required ranges of t. It
// asks first, one by one, for the ranges of t not yet required: those
// ready now are required from now on. Ranges no longer in t are
// forgotten.
func (r *readiness) check(ctx context.Context, t *ranges.Table, ready func(context.Context, []string) error) error {
	var need, fresh []*ranges.Range
	r.mu.Lock()
	for _, rng := range t.All() {
		if r.required[rng] {
			need = append(need, rng)
		} else {
			fresh = append(fresh, rng)
		}
	}
	for rng := range r.required {
		if cur, ok := t.ByID(rng.ID); !ok || cur != rng {
			delete(r.required, rng)
		}
	}
	r.mu.Unlock()
	for _, rng := range fresh {
		if ready(ctx, []string{rng.ID}) == nil {
			r.mu.Lock()
			r.required[rng] = true
			r.mu.Unlock()
			need = append(need, rng)
		}
	}
	return ready(ctx, rangeIDs(need))
}

func rangeIDs(rs []*ranges.Range) []string {
	ids := make([]string, len(rs))
	for i, rng := range rs {
		ids[i] = rng.ID
	}
	return ids
}
