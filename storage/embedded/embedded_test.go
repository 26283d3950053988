package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kgate/kgate/storage/embedded"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestStartValidates(t *testing.T) {
	f := func(name string, cfg embedded.Config) {
		t.Run(name, func(t *testing.T) {
			_, err := embedded.Start(context.Background(), cfg)
			if !errors.Is(err, embedded.ErrInvalidConfig) {
				t.Fatalf("Start: got %v, want ErrInvalidConfig", err)
			}
		})
	}
	f("no dir", embedded.Config{})
	f("bad client address", embedded.Config{Dir: t.TempDir(), ClientAddr: "localhost"})
	f("negative interval", embedded.Config{Dir: t.TempDir(), ProgressNotifyInterval: -time.Second})
}

func TestRestartKeepsData(t *testing.T) {
	if testing.Short() {
		t.Skip("needs etcd: skipped under -short")
	}
	storagetest.CheckGoroutines(t)
	dir := filepath.Join(t.TempDir(), "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func() (*embedded.Server, *clientv3.Client) {
		srv, err := embedded.Start(ctx, embedded.Config{
			Dir: dir, ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
			UnsafeNoFsync: true, Logger: storagetest.Logger(t),
			SnapshotCount: 50, // the writes below cross several snapshots
		})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
		if err != nil {
			t.Fatalf("cannot connect: %v", err)
		}
		return srv, c
	}
	stop := func(srv *embedded.Server, c *clientv3.Client) {
		if err := c.Close(); err != nil {
			t.Errorf("client Close: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}

	srv, c := start()
	for i := range 200 {
		if _, err := c.Put(ctx, fmt.Sprintf("/many/%03d", i), "x"); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	put, err := c.Put(ctx, "/k", "v")
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	stop(srv, c)

	srv, c = start()
	defer stop(srv, c)
	got, err := c.Get(ctx, "/k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("after restart got %v, want v at revision %d", got.Kvs, put.Header.Revision)
	}
	many, err := c.Get(ctx, "/many/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || many.Count != 200 {
		t.Fatalf("after restart %d keys under /many/ (%v), want 200", many.Count, err)
	}
}

func TestProgressNotify(t *testing.T) {
	storagetest.CheckGoroutines(t)
	c := storagetest.StartEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := c.Watch(clientv3.WithRequireLeader(ctx), "/nothing", clientv3.WithProgressNotify())
	select {
	case resp := <-wc:
		if !resp.IsProgressNotify() {
			t.Fatalf("first watch response is not a progress notification: %+v", resp)
		}
	case <-ctx.Done():
		t.Fatal("no progress notification")
	}
}
