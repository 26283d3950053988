package target

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fakeServer answers /readyz, /version and /metrics as an API server does.
func fakeServer(t *testing.T, metrics string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, metrics) })
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: secret}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, server)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenReadyHeap(t *testing.T) {
	ctx := context.Background()
	srv := fakeServer(t, "# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes 4.2e+07\n")
	tg, err := Open(Config{Name: "fake", Kubeconfig: kubeconfig(t, srv.URL), Pids: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if v := tg.Version(); v != "v1.37.2" {
		t.Fatalf("version %q", v)
	}
	heap, ok, err := tg.Heap(ctx)
	if err != nil || !ok || heap != 4.2e7 {
		t.Fatalf("Heap = %v, %v, %v", heap, ok, err)
	}
	if s, ok := tg.Process(); !ok || s.RSSBytes <= 0 {
		t.Fatalf("Process = %+v, %v", s, ok)
	}
	if tg.Config.QPS < 1e5 {
		t.Fatalf("client-side rate limit left at %v QPS", tg.Config.QPS)
	}
}

func TestHeapMissingAndMetricsURL(t *testing.T) {
	ctx := context.Background()
	api := fakeServer(t, "process_resident_memory_bytes 1e+08\n")
	cache := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "go_memstats_heap_inuse_bytes 123\n")
	}))
	defer cache.Close()
	tg, err := Open(Config{Name: "a", Kubeconfig: kubeconfig(t, api.URL)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := tg.Heap(ctx); err != nil || ok {
		t.Fatalf("heap of a server without Go collector: ok=%v err=%v", ok, err)
	}
	if _, ok := tg.Process(); ok {
		t.Fatal("Process without pids answered")
	}
	tg, err = Open(Config{Name: "b", Kubeconfig: kubeconfig(t, api.URL), MetricsURL: cache.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if heap, ok, err := tg.Heap(ctx); err != nil || !ok || heap != 123 {
		t.Fatalf("heap from MetricsURL = %v, %v, %v", heap, ok, err)
	}
}

// Requests of one clientset share a connection; each Separate client has
// its own.
func TestSeparateConnections(t *testing.T) {
	var mu sync.Mutex
	peers := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peers[r.RemoteAddr] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tg, err := Open(Config{Name: "fake", Kubeconfig: kubeconfig(t, srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	seen := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(peers)
	}
	for range 3 {
		if v := tg.Version(); v != "v1.37.2" {
			t.Fatalf("version %q", v)
		}
	}
	if n := seen(); n != 1 {
		t.Fatalf("one clientset used %d connections", n)
	}
	for i := range 3 {
		cs, closeIdle, err := tg.Separate(JSON)
		if err != nil {
			t.Fatal(err)
		}
		defer closeIdle()
		for range 2 {
			if _, err := cs.Discovery().ServerVersion(); err != nil {
				t.Fatal(err)
			}
		}
		if n := seen(); n != 2+i {
			t.Fatalf("after %d separate clients: %d connections", i+1, n)
		}
	}
}
