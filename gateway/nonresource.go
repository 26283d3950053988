package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/pprofhandler"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/clusterstatus"
	"github.com/kgate/kgate/gateway/internal/openapi"
	"github.com/kgate/kgate/gateway/internal/rest"
)

// StatusPath serves the cluster status `kgate status` prints. Like any
// non-resource URL it is authorized by RBAC (cluster-admin has it).
const StatusPath = "/kgate/status"

// The document at StatusPath.
type (
	Status        = clusterstatus.Status
	MemberStatus  = clusterstatus.MemberStatus
	RangeStatus   = clusterstatus.RangeStatus
	ReplicaStatus = clusterstatus.ReplicaStatus
)

// members is the membership a gateway reports.
type members = clusterstatus.Members

func (g *Gateway) serveStatus(rc *fasthttp.RequestCtx) error {
	ctx, cancel := context.WithTimeout(g.c.Base(), 10*time.Second)
	defer cancel()
	st, err := clusterstatus.Build(ctx, clusterstatus.Sources{
		Revisions: g.d.Backend.Revisions, Members: g.d.Members, Ranges: g.d.Backend.Ranges,
		Directory: g.d.Directory, CacheNodes: g.cfg.CacheNodes, Replicas: g.cfg.Replicas,
	})
	if err != nil {
		return err
	}
	body, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("cannot encode status: %w", err)
	}
	rc.SetContentType("application/json")
	rc.SetBody(body)
	return nil
}

// nonResource serves the non-resource URLs: the cluster status, metrics,
// the profiles (with Profiling), OpenAPI and discovery.
func (g *Gateway) nonResource(rc *fasthttp.RequestCtx, path string) error {
	if !rc.IsGet() && !rc.IsHead() {
		return apierror.MethodNotSupported(schema.GroupResource{}, string(rc.Method()))
	}
	switch {
	case path == StatusPath:
		return g.serveStatus(rc)
	case path == "/metrics":
		g.c.Metrics.Serve(rc)
		return nil
	case g.cfg.Profiling && (path == "/debug/pprof" || strings.HasPrefix(path, "/debug/pprof/")):
		if path == "/debug/pprof" {
			rc.Redirect("/debug/pprof/", fasthttp.StatusFound)
			return nil
		}
		pprofhandler.PprofHandler(rc)
		return nil
	case path == "/openapi/v2" || strings.HasPrefix(path, "/openapi/v3"):
		resp, ok := g.c.OpenAPI.Serve(path, string(rc.QueryArgs().Peek("hash")), string(rc.Request.Header.Peek("Accept")))
		if !ok {
			return rest.ErrNotFoundPath
		}
		if resp.Location != "" {
			rc.Response.Header.Set("Location", resp.Location)
		}
		if resp.Vary {
			rc.Response.Header.Set("Vary", "Accept")
		}
		if resp.ETag != "" {
			rc.Response.Header.Set("Etag", resp.ETag)
			if resp.NotModified(string(rc.Request.Header.Peek("If-None-Match"))) {
				rc.SetStatusCode(fasthttp.StatusNotModified)
				return nil
			}
		}
		if resp.Immutable {
			rc.Response.Header.Set("Cache-Control", "public, immutable")
			rc.Response.Header.Set("Expires", time.Now().Add(openapi.ExpiresIn).UTC().Format(http.TimeFormat))
		}
		rc.SetStatusCode(resp.Status)
		rc.SetContentType(resp.ContentType)
		rc.SetBody(resp.Body)
		return nil
	}
	resp, ok := g.c.Discovery.Serve(path, string(rc.Request.Header.Peek("Accept")))
	if !ok {
		return rest.ErrNotFoundPath
	}
	if resp.ETag != "" {
		rc.Response.Header.Set("Etag", resp.ETag)
		rc.Response.Header.Set("Vary", "Accept")
		rc.Response.Header.Set("Cache-Control", "public")
		if resp.NotModified(string(rc.Request.Header.Peek("If-None-Match"))) {
			rc.SetStatusCode(fasthttp.StatusNotModified)
			return nil
		}
	}
	rc.SetStatusCode(resp.Status)
	rc.SetContentType(resp.ContentType)
	rc.SetBody(resp.Body)
	return nil
}
