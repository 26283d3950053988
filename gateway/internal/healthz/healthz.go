// Package healthz answers /livez, /readyz and /healthz as kube-apiserver
// does: "ok", or 500 naming the failed checks; ?verbose lists every check,
// ?exclude= skips one, <root>/<check> runs one check. It knows nothing of
// what the checks look at.
package healthz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Timeout bounds the checks of one request: a probe's timeout must be
// longer.
const Timeout = 5 * time.Second

// ErrNoCheck: <root>/<check> names no check.
var ErrNoCheck = errors.New("healthz: no such check")

// Check is one named health check.
type Check struct {
	Name string
	Run  func(context.Context) error
}

// Serve answers the probe at path (a root, or <root>/<check>) with checks;
// /livez runs only the first. It returns ErrNoCheck for an unknown check
// and writes nothing then.
func Serve(rc *fasthttp.RequestCtx, path string, checks []Check) error {
	checks = slices.Clone(checks) // ?exclude deletes in place
	if path == "/livez" {
		checks = checks[:1]
	}
	root, only, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if only != "" {
		i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == only })
		if i < 0 {
			return ErrNoCheck
		}
		checks = checks[i : i+1]
	}
	for _, ex := range rc.QueryArgs().PeekMulti("exclude") {
		checks = slices.DeleteFunc(checks, func(c Check) bool { return c.Name == string(ex) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if err := c.Run(ctx); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
		}
	}
	rc.SetContentType("text/plain; charset=utf-8")
	rc.Response.Header.Set("X-Content-Type-Options", "nosniff")
	switch {
	case failed && only != "":
		rc.SetStatusCode(fasthttp.StatusInternalServerError)
		rc.SetBodyString("internal server error: " + strings.TrimPrefix(b.String(), "[-]"))
	case failed:
		rc.SetStatusCode(fasthttp.StatusInternalServerError)
		fmt.Fprintf(&b, "%s check failed\n", root)
		rc.SetBodyString(b.String())
	case rc.QueryArgs().Has("verbose"):
		fmt.Fprintf(&b, "%s check passed\n", root)
		rc.SetBodyString(b.String())
	default:
		rc.SetBodyString("ok")
	}
	return nil
}
