package gateway

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authn"
	"github.com/kgate/kgate/gateway/internal/guard"
	"github.com/kgate/kgate/gateway/internal/latency"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/rest"
	"github.com/kgate/kgate/storage/registry"
)

// The steps of the request pipeline, each declared here as the gateway
// uses it: access.Access authenticates, authorizes and answers the
// review APIs; guard.Guard audits and applies the fairness limits;
// rest.Handler serves resources.
type (
	authenticator interface {
		Authenticate(rc *fasthttp.RequestCtx) (user.Info, error)
	}
	requestGuard interface {
		// Audit starts the audit of a request that needs no admission
		// (a health probe); Unauthenticated audits a 401.
		Audit(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info)
		Unauthenticated(rc *fasthttp.RequestCtx, info *requestinfo.Info)
		// Admit audits a request and runs next under the fairness
		// limits, on its seats; Finish completes what Audit or Admit
		// started, once answered.
		Admit(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info, next func() error) error
		Panic(rc *fasthttp.RequestCtx)
		Finish(rc *fasthttp.RequestCtx, info *requestinfo.Info)
	}
	authorizer interface {
		// Authorize applies impersonation, authorizes the request and
		// records the user it runs as (rest.SetUser).
		Authorize(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) error
	}
	reviews interface {
		Serves(info *requestinfo.Info) bool
		ServeReview(rc *fasthttp.RequestCtx, info *requestinfo.Info, res *registry.Resource) error
	}
	resources interface {
		Serve(rc *fasthttp.RequestCtx, info *requestinfo.Info, res *registry.Resource) error
	}
	// connects serves the connect subresources (kubeletproxy.Proxy):
	// pods/log, exec, attach, portforward, proxy and nodes/proxy.
	connects interface {
		Serves(info *requestinfo.Info) bool
		Serve(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) error
	}
	// aggregated serves the paths of non-local APIServices
	// (aggregator.Dispatch), discovery of their group/version included.
	aggregated interface {
		Serves(path string) bool
		Serve(rc *fasthttp.RequestCtx, u user.Info) error
	}
)

// handle is the server's handler: route, then write any error as a
// Status, log it and count the request.
func (g *Gateway) handle(rc *fasthttp.RequestCtx) {
	start := time.Now()
	latency.Start(rc)
	var info requestinfo.Info
	defer g.guard.Finish(rc, &info) // audit, fairness: after the Status is written
	defer func() {
		// A bug in one request must not take the gateway down: answer 500
		// and log where it happened.
		if p := recover(); p != nil {
			g.log.Error("panic serving request", "method", string(rc.Method()), "path", string(rc.Path()), "panic", p, "stack", string(debug.Stack()))
			g.guard.Panic(rc)
			if !rc.Hijacked() {
				g.writeError(rc, &info, fmt.Errorf("internal error: %v", p))
			}
		}
	}()
	// Set first so that a watch stream, which writes its own headers,
	// can copy it (rest.Handler.watch).
	rc.Response.Header.Set(HeaderAuditID, guard.AuditID(rc))
	err := g.route(rc, &info)
	if err != nil {
		g.writeError(rc, &info, err)
	}
	if rc.Hijacked() {
		// Watches are counted when they start; their duration is the
		// stream's, not this handler's.
		g.metrics.Observe(rc, &info, 200, time.Since(start))
		return
	}
	g.metrics.Observe(rc, &info, rc.Response.StatusCode(), time.Since(start))
}

func (g *Gateway) route(rc *fasthttp.RequestCtx, info *requestinfo.Info) error {
	path := string(rc.Path())
	if isHealthPath(path) {
		return g.serveHealth(rc, info, path)
	}
	u, err := g.authn.Authenticate(rc)
	if err != nil {
		if errors.Is(err, authn.ErrUnauthorized) {
			g.guard.Unauthenticated(rc, info)
			return apierror.Unauthorized("Unauthorized")
		}
		return err
	}
	if err := requestinfo.Parse(info, string(rc.Method()), path, rc.QueryArgs()); err != nil {
		return rest.ErrNotFoundPath
	}
	return g.guard.Admit(rc, info, u, func() error { return g.serve(rc, info, u, path) })
}

// serve authorizes and serves an admitted request.
func (g *Gateway) serve(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info, path string) error {
	if err := g.authz.Authorize(rc, info, u); err != nil {
		return err
	}
	if g.aggregate != nil && g.aggregate.Serves(path) {
		return g.aggregate.Serve(rc, rest.User(rc))
	}
	if !info.IsResourceRequest {
		return g.nonResource(rc, path)
	}
	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	res, ok := g.reg.Lookup(gvr)
	if !ok {
		return rest.ErrNotFoundPath
	}
	if g.reviews.Serves(info) {
		return g.reviews.ServeReview(rc, info, res)
	}
	if g.connect != nil && g.connect.Serves(info) && res.HasSubresource(info.Subresource) {
		return g.connect.Serve(rc, info, rest.User(rc))
	}
	return g.rest.Serve(rc, info, res)
}
