package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// health serves /livez, /healthz and /readyz as kube-apiserver does: "ok"
// or 500 with the failed checks; ?verbose lists every check.
func (g *Gateway) health(rc *fasthttp.RequestCtx, path string) error {
	type check struct {
		name string
		run  func(context.Context) error
	}
	checks := []check{{"ping", func(context.Context) error { return nil }}}
	if path != "/livez" {
		checks = append(checks,
			check{"etcd", func(ctx context.Context) error { _, err := g.cfg.Revisions.Current(ctx); return err }},
			check{"cachenode", func(ctx context.Context) error { return g.router.Ready(ctx, g.rangeIDs) }},
			check{"nats", func(context.Context) error {
				if !g.cfg.NATS.IsConnected() {
					return fmt.Errorf("not connected")
				}
				return nil
			}},
			check{"rbac", g.rbacReady},
			check{"shutdown", func(context.Context) error { return g.base.Err() }},
		)
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
		fmt.Fprintf(&b, "%s check failed\n", strings.TrimPrefix(path, "/"))
		rc.SetBodyString(b.String())
		return nil
	}
	if verbose {
		fmt.Fprintf(&b, "%s check passed\n", strings.TrimPrefix(path, "/"))
		rc.SetBodyString(b.String())
		return nil
	}
	rc.SetBodyString("ok")
	return nil
}
