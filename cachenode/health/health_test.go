package health

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kgate_cachenode_test_total", Help: "test"})
	reg.MustRegister(c)
	var ready, rangeBad atomic.Bool
	checks := func() []Check {
		c := Check{Name: "range pods"}
		if rangeBad.Load() {
			c.Err = errors.New("differs from etcd, relisting")
		}
		return []Check{c}
	}
	h := Handler(ready.Load, checks, reg)
	f := func(path string, isReady bool, wantCode int, wantBody string) {
		t.Helper()
		ready.Store(isReady)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != wantCode || !strings.Contains(w.Body.String(), wantBody) {
			t.Fatalf("%s (ready %v): %d %q, want %d with %q", path, isReady, w.Code, w.Body.String(), wantCode, wantBody)
		}
	}
	f("/livez", false, 200, "ok")
	f("/readyz", false, 500, "[-]ranges failed: not synced")
	f("/readyz", true, 200, "ok")
	f("/readyz?verbose", true, 200, "[+]ranges ok\n[+]range pods ok\nreadyz check passed")
	rangeBad.Store(true)
	f("/readyz", true, 500, "[-]range pods failed: differs from etcd, relisting\nreadyz check failed")
	rangeBad.Store(false)
	f("/metrics", false, 200, "kgate_cachenode_test_total 0")
	f("/nothing", true, 404, "")
}

func TestServer(t *testing.T) {
	if _, err := New(Config{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("made a server without Ready and Gatherer")
	}
	s, err := New(Config{Listen: "127.0.0.1:0", Ready: func() bool { return true }, Gatherer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp, err := http.Get("http://" + s.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("/readyz: %d %q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
