// Package cachenodetest starts, for tests of other packages, an embedded
// etcd, an embedded NATS server and a cache node reflecting every built-in
// resource, all stopped in t.Cleanup.
package cachenodetest

import (
	"context"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Env is a running cache node and what it runs on.
type Env struct {
	Etcd     *clientv3.Client
	NATSURL  string
	NATS     *nats.Conn // the node's connection; tests may subscribe on it or make their own
	Registry *registry.Registry
	Codec    *codec.Codec
	Ranges   *ranges.Table
	Node     *cachenode.Node
	Client   *client.Client
}

// Start starts etcd, NATS and a ready cache node over the built-in
// registry with its default range table. configure, when given, may
// change the node's config before it starts. The test is skipped under
// -short.
func Start(t testing.TB, configure ...func(*cachenode.Config)) *Env {
	t.Helper()
	etcd := storagetest.StartEtcd(t)

	ns, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		t.Fatalf("cannot start NATS: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("cachenodetest"))
	if err != nil {
		t.Fatalf("cannot connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)

	b, err := backend.Open(backend.Config{Etcd: etcd, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cfg := cachenode.Config{
		Etcd: etcd, NATS: nc, Registry: b.Registry, Codec: b.Codec, Ranges: b.Ranges,
		Listen:           "127.0.0.1:0",
		ProgressInterval: 200 * time.Millisecond,
		Logger:           storagetest.Logger(t),
	}
	for _, f := range configure {
		f(&cfg)
	}
	node, err := cachenode.New(cfg)
	if err != nil {
		t.Fatalf("cannot make cache node: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache node: %v", err)
		}
	})
	c, err := client.New(client.Config{Addr: node.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	if err := node.WaitReady(rctx); err != nil {
		t.Fatalf("cache node not ready: %v", err)
	}
	return &Env{
		Etcd: etcd, NATSURL: ns.ClientURL(), NATS: nc, Registry: b.Registry, Codec: b.Codec,
		Ranges: b.Ranges.Current(), Node: node, Client: c,
	}
}
