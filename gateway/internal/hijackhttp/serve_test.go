package hijackhttp

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/gateway/internal/proxyheader"
)

// replayed is the request the backend handlers read from RequestBytes
// of a request with the given extra header.
func replayed(t *testing.T, name, value string) (*http.Request, error) {
	t.Helper()
	var rc fasthttp.RequestCtx
	rc.Request.Header.SetMethod("GET")
	rc.Request.SetRequestURI("/api/v1/nodes/n/proxy/healthz?x=1")
	rc.Request.Header.SetHost("gateway")
	rc.Request.Header.Set("Authorization", "Bearer secret")
	rc.Request.Header.Set("X-Remote-User", "admin")
	rc.Request.Header.Set("Impersonate-User", "admin")
	rc.Request.Header.Set("Accept", "text/plain")
	rc.Request.Header.Add(name, value)
	return http.ReadRequest(bufio.NewReader(bytes.NewReader(RequestBytes(&rc))))
}

func checkNoCredentials(t *testing.T, req *http.Request) {
	t.Helper()
	for name, vs := range req.Header {
		if !proxyheader.Forwardable(name) {
			t.Errorf("header %s: %q reaches the backend", name, vs)
		}
	}
}

func TestRequestBytes(t *testing.T) {
	req, err := replayed(t, "X-Stream-Protocol-Version", "v4.channel.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	checkNoCredentials(t, req)
	if req.Method != "GET" || req.URL.String() != "/api/v1/nodes/n/proxy/healthz?x=1" || req.Host != "gateway" {
		t.Errorf("replayed %s %s host %q", req.Method, req.URL, req.Host)
	}
	if req.Header.Get("Accept") != "text/plain" || req.Header.Get("X-Stream-Protocol-Version") != "v4.channel.k8s.io" {
		t.Errorf("ordinary headers lost: %v", req.Header)
	}
	// A value smuggling a second header line adds none.
	req, err = replayed(t, "X-Note", "a\r\nAuthorization: Bearer secret")
	if err != nil {
		t.Fatal(err)
	}
	checkNoCredentials(t, req)
	for _, tt := range []struct{ name, value string }{{"X-Note", "a\r\nX"}, {"X-Note", "a\x00b"}} {
		var rc fasthttp.RequestCtx
		rc.Request.Header.Set(tt.name, tt.value)
		if v := rc.Request.Header.Peek(tt.name); !proxyheader.Safe(v) && bytes.Contains(RequestBytes(&rc), v) {
			t.Errorf("unsafe value %q replayed", v)
		}
	}
}

// FuzzRequestBytes: whatever header a client sends, the replayed
// request carries no credential or identity header.
func FuzzRequestBytes(f *testing.F) {
	f.Add("X-Remote-User", "admin")
	f.Add("x_remote_group", "system:masters")
	f.Add("Authorization", "Bearer secret")
	f.Add("X-Note", "a\r\nX-Remote-User: admin")
	f.Add("X-Note", "a\nImpersonate-User: admin")
	f.Add("Impersonate-Extra-Scopes", "secret")
	f.Fuzz(func(t *testing.T, name, value string) {
		req, err := replayed(t, name, value)
		if err != nil {
			return // not a request the backend would serve
		}
		checkNoCredentials(t, req)
	})
}
