// Package storagetest starts an embedded etcd for tests and checks that
// tests leave no goroutines behind.
package storagetest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kgate/kgate/storage/embedded"
)

// ProgressNotifyInterval is the watch progress notification interval of
// the etcd StartEtcd starts.
const ProgressNotifyInterval = 100 * time.Millisecond

// StartEtcd starts an embedded etcd in t.TempDir on free loopback ports and
// returns a client connected to it. Both are closed in t.Cleanup. The test
// is skipped under -short.
func StartEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	srv := StartServer(t)
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   srv.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("cannot connect to embedded etcd: %v", err)
	}
	// Cleanups run last-in first-out: the client closes before the server.
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("cannot close etcd client: %v", err)
		}
	})
	return c
}

// StartServer starts an embedded etcd like StartEtcd and returns the
// server, for tests that make their own clients or restart it.
func StartServer(t testing.TB) *embedded.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs etcd: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := embedded.Start(ctx, embedded.Config{
		Dir:                    filepath.Join(t.TempDir(), "etcd"),
		ClientAddr:             "127.0.0.1:0",
		PeerAddr:               "127.0.0.1:0",
		ProgressNotifyInterval: ProgressNotifyInterval,
		UnsafeNoFsync:          true,
		Logger:                 Logger(t),
	})
	if err != nil {
		t.Fatalf("cannot start embedded etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Logf("cannot stop embedded etcd: %v", err)
		}
	})
	return srv
}

// Logger returns a logger writing to t.Log at warn level and above.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
