package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/storage/storagetest"
)

// TestShutdownDelay: once Run's context ends, a gateway with a shutdown
// delay fails /readyz (its shutdown check) at once but keeps accepting
// connections and answering requests (/livez passes) until the delay is
// over; then Run returns. A negative delay is refused.
func TestShutdownDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and NATS")
	}
	b, nc := startStack(t)
	prom := prometheus.NewRegistry()
	cfg := Config{
		Listen: "127.0.0.1:0", TLS: &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, NextProtos: []string{"http/1.1"}},
		CacheNodes: []string{"127.0.0.1:1"}, Auth: AuthConfig{AnonymousAuth: true},
		// Long enough for the checks below on a loaded machine: the test
		// waits for all of it once.
		ShutdownDelay: 15 * time.Second,
	}
	deps := Deps{Backend: b, NATS: nc, Logger: storagetest.Logger(t), Metrics: prom, Gatherer: prom}

	neg := cfg
	neg.ShutdownDelay = -time.Second
	if _, err := New(neg, deps); err == nil {
		t.Fatal("made a gateway with a negative shutdown delay")
	}

	g, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	select {
	case <-g.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	// A new connection for each request: the delay must keep accepting.
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true,
	}}
	get := func(path string) (int, error) {
		resp, err := client.Get("https://" + g.Addr() + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if code, err := get("/readyz/shutdown"); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz/shutdown before the shutdown: %d, %v", code, err)
	}

	cancel()
	storagetest.Eventually(t, 10*time.Second, "/readyz/shutdown failing", func() error {
		if code, err := get("/readyz/shutdown"); err != nil || code != http.StatusInternalServerError {
			return fmt.Errorf("%d, %v", code, err)
		}
		return nil
	})
	if code, err := get("/livez"); err != nil || code != http.StatusOK {
		t.Fatalf("/livez during the shutdown delay: %d, %v", code, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned during the shutdown delay: %v", err)
	default:
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := net.Dial("tcp", g.Addr()); err == nil {
		t.Fatal("still accepting after Run returned")
	}
}

// selfSigned is a serving certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
