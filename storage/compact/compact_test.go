package compact_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kgate/kgate/storage/compact"
	"github.com/kgate/kgate/storage/embedded"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestNewValidates(t *testing.T) {
	c := &clientv3.Client{}
	f := func(name string, cfg compact.Config) {
		t.Run(name, func(t *testing.T) {
			if _, err := compact.New(cfg); err == nil {
				t.Fatal("New: got nil error")
			}
		})
	}
	f("no client", compact.Config{Interval: time.Minute, Logger: slog.Default()})
	f("no interval", compact.Config{Client: c, Logger: slog.Default()})
	f("negative interval", compact.Config{Client: c, Interval: -time.Second, Logger: slog.Default()})
	f("no logger", compact.Config{Client: c, Interval: time.Minute})
}

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := embedded.Start(ctx, embedded.Config{
		Dir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		UnsafeNoFsync: true, Logger: storagetest.Logger(t),
	})
	if err != nil {
		t.Fatalf("cannot start etcd: %v", err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("cannot connect: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = srv.Close()
	})
	return c
}

// put writes key and returns the revision of the write.
func put(t *testing.T, c *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := c.Put(context.Background(), key, value)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return resp.Header.Revision
}

// compactedAt reports whether a read at rev fails as compacted.
func compactedAt(t *testing.T, c *clientv3.Client, key string, rev int64) bool {
	t.Helper()
	_, err := c.Get(context.Background(), key, clientv3.WithRev(rev))
	switch {
	case err == nil:
		return false
	case errors.Is(err, rpctypes.ErrCompacted):
		return true
	default:
		t.Fatalf("Get at %d: %v", rev, err)
		return false
	}
}

// TestTwoCompactorsCompactOnce runs two members' rounds interleaved, as two
// gateways on the same interval do: per interval exactly one of them
// compacts, the other learns it from the key.
func TestTwoCompactorsCompactOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs etcd: skipped under -short")
	}
	c := startEtcd(t)
	ctx := context.Background()

	old := put(t, c, "/registry/configmaps/default/a", "1")
	// Interval 1: both start; A claims the key first (no compaction on
	// the first round), B finds it claimed.
	va, ra, got, err := compact.Round(ctx, c, 0, 0)
	if err != nil || got != 0 || va != 1 {
		t.Fatalf("A round 1 = version %d, compacted %d, %v; want 1, 0, nil", va, got, err)
	}
	vb, rb, got, err := compact.Round(ctx, c, 0, 0)
	if err != nil || got != 0 || vb != 1 {
		t.Fatalf("B round 1 = version %d, compacted %d, %v; want 1 (A's claim), 0, nil", vb, got, err)
	}
	put(t, c, "/registry/configmaps/default/a", "2")
	if compactedAt(t, c, "/registry/configmaps/default/a", old) {
		t.Fatal("compacted after the first interval; upstream never compacts on the first round")
	}

	// Interval 2: A compacts at the revision it saw in interval 1; B
	// loses the race and learns A's compaction from the key.
	va, ra, gotA, err := compact.Round(ctx, c, va, ra)
	if err != nil || gotA == 0 {
		t.Fatalf("A round 2 = compacted %d, %v; want a compaction", gotA, err)
	}
	vb, rb, gotB, err := compact.Round(ctx, c, vb, rb)
	if err != nil {
		t.Fatalf("B round 2: %v", err)
	}
	if gotB != gotA {
		t.Fatalf("B learnt compaction at %d, A compacted at %d", gotB, gotA)
	}
	if vb != va {
		t.Fatalf("B's version %d, A's %d: B must catch up with the key", vb, va)
	}
	if !compactedAt(t, c, "/registry/configmaps/default/a", old) {
		t.Fatalf("revision %d still readable after compaction at %d", old, gotA)
	}
	resp, err := c.Get(ctx, compact.Key)
	if err != nil {
		t.Fatalf("Get %s: %v", compact.Key, err)
	}
	if v := resp.Kvs[0].Version; v != 2 {
		t.Fatalf("%s version = %d after two intervals, want 2 (one compaction claim per interval)", compact.Key, v)
	}

	// Interval 3: B now wins with the state it learnt.
	_, _, gotB, err = compact.Round(ctx, c, vb, rb)
	if err != nil || gotB <= gotA {
		t.Fatalf("B round 3 = compacted %d, %v; want a compaction past %d", gotB, err, gotA)
	}
	_, _, gotA, err = compact.Round(ctx, c, va, ra)
	if err != nil || gotA != gotB {
		t.Fatalf("A round 3 = compacted %d, %v; want B's %d learnt from the key", gotA, err, gotB)
	}
}

// TestRun drives Compactor.Run with a clock the test ticks: revisions
// written before the previous tick are gone after the next one.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("needs etcd: skipped under -short")
	}
	storagetest.CheckGoroutines(t)
	c := startEtcd(t)
	ticks := make(chan time.Time)
	comp, err := compact.New(compact.Config{
		Client: c, Interval: time.Minute, Logger: storagetest.Logger(t),
		After: func(time.Duration) <-chan time.Time { return ticks },
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- comp.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	old := put(t, c, "/registry/events/default/e", "1")
	ticks <- time.Now() // first round: claims, remembers the revision
	ticks <- time.Now() // the send returns once Run waits again: round 1 is done
	storagetest.Eventually(t, 10*time.Second, "a compaction", storagetest.Holds(func() bool { return comp.Compacted() >= old }))
	if !compactedAt(t, c, "/registry/events/default/e", old) {
		t.Fatalf("revision %d readable after Compacted() = %d", old, comp.Compacted())
	}
}
