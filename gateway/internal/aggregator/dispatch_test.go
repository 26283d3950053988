package aggregator

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/valyala/fasthttp"
	"k8s.io/apiserver/pkg/authentication/user"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/storage/registry"
)

// TestDispatchServes: only the paths of APIServices with a service are
// dispatched, discovery of their group/version included, and the
// dispatch follows the store's changes.
func TestDispatchServes(t *testing.T) {
	apiService := func(name string, remote bool) *apiregistrationv1.APIService {
		s := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if remote {
			s.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}
		}
		return s
	}
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	store := feed.NewStore(apiService("v1.wardle.example.com", true), apiService("v1.apps", false))
	d, err := NewDispatch(t.Context(), Config{AllowLoopback: true}, Deps{
		Registry: reg, Store: memStore{}, Services: store, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/apis/wardle.example.com/v1", true},
		{"/apis/wardle.example.com/v1/", true},
		{"/apis/wardle.example.com/v1/namespaces/a/flunders/x", true},
		{"/apis/wardle.example.com", false}, // the group's discovery is the gateway's
		{"/apis/wardle.example.com/v2/flunders", false},
		{"/apis/apps/v1/deployments", false}, // local
		{"/api/v1/pods", false},
		{"/apis", false},
	} {
		if got := d.Serves(tt.path); got != tt.want {
			t.Errorf("Serves(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	if err := store.Delete(apiService("v1.wardle.example.com", true)); err != nil {
		t.Fatal(err)
	}
	if d.Serves("/apis/wardle.example.com/v1/flunders") {
		t.Error("a deleted APIService is still dispatched")
	}
	if _, err := NewDispatch(t.Context(), Config{ProxyClientCertFile: "c"}, Deps{
		Registry: reg, Store: memStore{}, Services: store, Logger: slog.New(slog.DiscardHandler),
	}); err == nil {
		t.Error("a certificate without its key is accepted")
	}
}

// TestDispatch: through a fasthttp server as the gateway's, a request
// of a non-local APIService reaches the extension server on the
// hijacked connection with the front-proxy certificate and the user in
// X-Remote-*, a watch streams, and once the server is gone the request
// answers a 503 Status.
func TestDispatch(t *testing.T) {
	x := startExtension(t)
	_, port, _ := net.SplitHostPort(x.backend.Listener.Addr().String())
	api := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.example.com", ResourceVersion: "1"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "example.com", Version: "v1", CABundle: x.serving.PEM,
			Service: &apiregistrationv1.ServiceReference{Namespace: "ext", Name: "api"}},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue}}},
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(certFile, x.clientCert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, x.clientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	base, cancel := context.WithCancel(t.Context())
	d, err := NewDispatch(base, Config{ProxyClientCertFile: certFile, ProxyClientKeyFile: keyFile, EnableAggregatorRouting: true, AllowLoopback: true},
		Deps{Registry: x.reg, Store: x.store, Services: feed.NewStore(api), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"dev"}}
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		if !d.Serves(string(rc.Path())) {
			rc.SetStatusCode(http.StatusNotFound)
			return
		}
		if err := d.Serve(rc, alice); err != nil {
			rc.SetStatusCode(http.StatusInternalServerError)
		}
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		cancel()
		_ = srv.Shutdown()
		if err := d.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	})
	url := "http://" + l.Addr().String()
	get := func(path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+path, nil)
		req.Header.Set("Authorization", "Bearer secret")
		req.Header.Set("X-Remote-User", "admin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := get("/apis/example.com/v1/namespaces/a/widgets")
	var seen struct {
		CN     string      `json:"cn"`
		Path   string      `json:"path"`
		Header http.Header `json:"header"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen.CN != "front-proxy-client" || seen.Path != "/apis/example.com/v1/namespaces/a/widgets" ||
		seen.Header.Get("X-Remote-User") != "alice" || seen.Header.Get("Authorization") != "" {
		t.Errorf("the extension server saw %+v (port %s)", seen, port)
	}

	w := get("/apis/example.com/v1/widgets?watch=true")
	r := bufio.NewReader(w.Body)
	x.next <- `{"type":"ADDED"}`
	if line, err := r.ReadString('\n'); err != nil || line != "{\"type\":\"ADDED\"}\n" {
		t.Errorf("watch line %q, %v", line, err)
	}
	x.stop()
	w.Body.Close()

	x.backend.Close()
	resp = get("/apis/example.com/v1/widgets")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st metav1.Status
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &st) != nil || st.Kind != "Status" || st.Code != http.StatusServiceUnavailable {
		t.Errorf("with the server gone: %d %s", resp.StatusCode, body)
	}
}
