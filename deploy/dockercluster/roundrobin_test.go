package dockercluster

import (
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestRoundRobin: a connection no gateway process took (refused, or
// closed by a port proxy before any byte) goes to the next address; any
// other failure is the request's.
func TestRoundRobin(t *testing.T) {
	// ConnState is set before the server starts: its connections read it.
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	good := srv.Listener.Addr().String()

	refused := func() string { // a port nobody listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().String()
		ln.Close()
		return a
	}()
	// serve accepts and answers every connection with reply (nothing: a
	// port proxy that cannot reach its container), then closes it.
	serve := func(reply string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return // the test ended
				}
				io.WriteString(c, reply)
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	proxy, garbage := serve(""), serve("HTTP/1.1 400 Bad Request\r\n\r\n")

	f := func(name string, addrs []string, wantErr string, refusedN, proxyN int64) {
		t.Helper()
		rr, err := NewRoundRobin(addrs)
		if err != nil {
			t.Fatal(err)
		}
		tlsCfg := srv.Client().Transport.(*http.Transport).TLSClientConfig
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := rr.DialTLS(ctx, "tcp", "127.0.0.1:443", tlsCfg)
		if conn != nil {
			conn.Close()
		}
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%s: error %v, want %q", name, err, wantErr)
		}
		if rr.Refused.Load() != refusedN || rr.ProxyRefused.Load() != proxyN {
			t.Errorf("%s: refused %d, by the proxy %d; want %d, %d", name, rr.Refused.Load(), rr.ProxyRefused.Load(), refusedN, proxyN)
		}
	}
	f("first up", []string{good, refused}, "", 0, 0)
	f("refused, then up", []string{refused, good}, "", 1, 0)
	f("closed by a proxy, then up", []string{proxy, good}, "", 0, 1)
	f("all refused", []string{refused, proxy}, "every gateway refused", 1, 1)
	f("an answer that is not TLS fails", []string{garbage, good}, "TLS handshake", 0, 0)

	// Through Config: requests, every connection new and in turn.
	rr, err := NewRoundRobin([]string{refused, good})
	if err != nil {
		t.Fatal(err)
	}
	conns.Store(0) // count this part's connections only
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg, err := rr.Config(&rest.Config{Host: "https://127.0.0.1:443", TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: cfg.Transport}
	for range 3 {
		resp, err := hc.Get("https://127.0.0.1:443/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("body %q", b)
		}
	}
	if n := conns.Load(); n != 3 || rr.Refused.Load() != 3 {
		t.Errorf("%d connections, %d refused; want 3 and 3 (each request tries the refusing address first)", n, rr.Refused.Load())
	}
}
