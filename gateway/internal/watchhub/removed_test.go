package watchhub

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// TestHubEndsRemovedRange: a range that leaves the table ends its
// watchers with ErrRangeRemoved and drops its subscriptions; the other
// ranges go on, and the range can come back.
func TestHubEndsRemovedRange(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cm := registry.Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespaced: true, Prefix: "/registry/configmaps"}
	secrets := registry.Resource{Version: "v1", Resource: "secrets", Kind: "Secret", Namespaced: true, Prefix: "/registry/secrets"}
	reg, err := registry.New(scheme, []registry.Resource{cm, secrets})
	if err != nil {
		t.Fatal(err)
	}
	table, err := ranges.Follow(reg, ranges.Config{})
	if err != nil {
		t.Fatal(err)
	}
	nc := startNATS(t)
	hub, err := New(Config{NATS: nc, Source: &window{}, Ranges: table, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()

	subsBefore := nc.NumSubscriptions()
	wcm, err := hub.Watch("configmaps", 0, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer wcm.Close()
	wsec, err := hub.Watch("secrets", 0, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer wsec.Close()
	if hub.Feeds() != 2 || nc.NumSubscriptions() != subsBefore+4 {
		t.Fatalf("%d feeds, %d subscriptions: want 2 and %d", hub.Feeds(), nc.NumSubscriptions(), subsBefore+4)
	}
	ms, err := hub.WatchRanges([]string{"configmaps", "secrets"}, 0, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	merged := ms.(*Merged)
	if _, err := hub.Watch("unknown", 0, Filter{}); !errors.Is(err, ErrRangeRemoved) {
		t.Errorf("Watch of a range not in the table: %v, want ErrRangeRemoved", err)
	}

	if err := reg.Remove(cm.GVR()); err != nil {
		t.Fatal(err)
	}
	if _, err := wcm.Next(context.Background()); !errors.Is(err, ErrRangeRemoved) {
		t.Fatalf("watcher of the removed range: %v, want ErrRangeRemoved", err)
	}
	// A merge over it ends too: Ready, which never waits, takes the
	// error from the removed range's pump and keeps it for Next.
	deadline := time.Now().Add(10 * time.Second)
	for merged.failed == nil && time.Now().Before(deadline) {
		if d, ok := merged.Ready(); ok {
			t.Fatalf("merge of an empty and a removed range released %+v", d)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := merged.Next(context.Background()); !errors.Is(err, ErrRangeRemoved) {
		t.Fatalf("merge over the removed range: %v, want ErrRangeRemoved", err)
	}
	if err := merged.Progress(context.Background()); !errors.Is(err, ErrRangeRemoved) {
		t.Errorf("Progress of the ended merge: %v, want ErrRangeRemoved", err)
	}
	if hub.Feeds() != 1 || nc.NumSubscriptions() != subsBefore+2 {
		t.Errorf("%d feeds, %d subscriptions after removal: want 1 and %d", hub.Feeds(), nc.NumSubscriptions(), subsBefore+2)
	}
	if _, err := hub.Watch("configmaps", 0, Filter{}); !errors.Is(err, ErrRangeRemoved) {
		t.Errorf("Watch of the removed range: %v, want ErrRangeRemoved", err)
	}
	if _, err := hub.WatchRanges([]string{"secrets", "configmaps"}, 0, Filter{}); !errors.Is(err, ErrRangeRemoved) {
		t.Errorf("WatchRanges with the removed range: %v, want ErrRangeRemoved", err)
	}
	// The other range's watcher was not touched.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := wsec.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("watcher of the remaining range: %v, want only the caller's cancellation", err)
	}

	if err := reg.Add(cm); err != nil {
		t.Fatal(err)
	}
	w, err := hub.Watch("configmaps", 0, Filter{})
	if err != nil {
		t.Fatalf("Watch after the range came back: %v", err)
	}
	w.Close()
}
