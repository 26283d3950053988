package healthz

import (
	"context"
	"errors"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestServe(t *testing.T) {
	ok := func(context.Context) error { return nil }
	bad := func(context.Context) error { return errors.New("down") }
	checks := []Check{{Name: "ping", Run: ok}, {Name: "etcd", Run: ok}, {Name: "cache", Run: bad}}
	for _, tc := range []struct {
		uri      string
		code     int
		body     string
		noSuchCk bool
	}{
		{uri: "/livez", code: 200, body: "ok"},
		{uri: "/livez?verbose", code: 200, body: "[+]ping ok\nlivez check passed\n"},
		{uri: "/readyz", code: 500, body: "[+]ping ok\n[+]etcd ok\n[-]cache failed: down\nreadyz check failed\n"},
		{uri: "/readyz?exclude=cache", code: 200, body: "ok"},
		{uri: "/readyz?exclude=cache&verbose", code: 200, body: "[+]ping ok\n[+]etcd ok\nreadyz check passed\n"},
		{uri: "/readyz/etcd", code: 200, body: "ok"},
		{uri: "/healthz/cache", code: 500, body: "internal server error: cache failed: down\n"},
		{uri: "/readyz/nope", noSuchCk: true},
	} {
		t.Run(tc.uri, func(t *testing.T) {
			rc := &fasthttp.RequestCtx{}
			rc.Request.SetRequestURI(tc.uri)
			err := Serve(rc, string(rc.Path()), checks)
			if tc.noSuchCk {
				if !errors.Is(err, ErrNoCheck) {
					t.Fatalf("Serve = %v, want ErrNoCheck", err)
				}
				return
			}
			if err != nil || rc.Response.StatusCode() != tc.code || string(rc.Response.Body()) != tc.body {
				t.Errorf("Serve = %v, %d %q; want %d %q", err, rc.Response.StatusCode(), rc.Response.Body(), tc.code, tc.body)
			}
		})
	}
}
