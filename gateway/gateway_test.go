package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestGatewayLeaksNothing: a gateway that never runs is released by
// Close; one whose Run fails early (its address taken) releases what New
// built; one that ran stops every goroutine it started (feeds, guard,
// server) when its context ends.
func TestGatewayLeaksNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and NATS")
	}
	b, nc := startStack(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	newGateway := func(t *testing.T) *Gateway {
		t.Helper()
		prom := prometheus.NewRegistry()
		g, err := New(Config{
			Listen: taken.Addr().String(), TLS: &tls.Config{}, CacheNodes: []string{"127.0.0.1:1"},
			Auth: AuthConfig{AnonymousAuth: true},
		}, Deps{Backend: b, NATS: nc, Logger: storagetest.Logger(t), Metrics: prom, Gatherer: prom})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// Warm up what the etcd client starts once per connection.
	if err := newGateway(t).Run(context.Background()); err == nil {
		t.Fatal("ran on a taken address")
	}

	t.Run("closed without running", func(t *testing.T) {
		g := newGateway(t)
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if g.c.Stopping() == nil {
			t.Fatal("Close left the gateway's context running")
		}
	})
	t.Run("run failing early", func(t *testing.T) {
		g := newGateway(t)
		if err := g.Run(context.Background()); err == nil {
			t.Fatal("ran on a taken address")
		}
		if g.c.Stopping() == nil {
			t.Fatal("Run returned with the gateway's context running")
		}
	})
	t.Run("run until cancelled", func(t *testing.T) {
		storagetest.CheckGoroutines(t)
		g := newGateway(t)
		g.cfg.Listen = "127.0.0.1:0"
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		select {
		case <-g.Ready():
		case err := <-done:
			t.Fatalf("Run: %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// startStack starts etcd and NATS in-process and opens the storage stack
// on them, all closed when t ends.
func startStack(t *testing.T) (*backend.Backend, *nats.Conn) {
	t.Helper()
	etcd := storagetest.StartEtcd(t)
	ns, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := backend.Open(backend.Config{Etcd: etcd, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, nc
}
