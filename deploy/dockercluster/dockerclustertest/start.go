// Package dockerclustertest starts a dockercluster.Cluster for a test:
// the gate on the environment the Makefile sets, a unique name, removal
// at the end, and every container's log kept when the test failed.
package dockerclustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kgate/kgate/deploy/dockercluster"
)

// Start starts a cluster with cfg (Name, Dir, KgateBin, Images and Logger
// filled in) for t, which is skipped unless the environment variable gate
// is set (a Makefile target sets it with KGATE_BIN and the images of make
// images) or under -short. The cluster is removed when t ends.
func Start(t *testing.T, ctx context.Context, gate string, cfg dockercluster.Config) *dockercluster.Cluster {
	t.Helper()
	if os.Getenv(gate) == "" {
		t.Skipf("Docker test: run by its make target (%s=1, KGATE_BIN and the images of make images)", gate)
	}
	if testing.Short() {
		t.Skip("Docker test: skipped under -short")
	}
	if err := dockercluster.Available(ctx, ""); err != nil {
		t.Fatalf("%s is set but Docker is not usable: %v", gate, err)
	}
	bin := os.Getenv("KGATE_BIN")
	if bin == "" {
		t.Fatal("KGATE_BIN is not set: the make target sets it to the kgate binary of the images")
	}
	tag := os.Getenv("KGATE_IMAGE_TAG")
	if tag == "" {
		tag = "latest"
	}
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	name := "kgt-" + hex.EncodeToString(suffix)
	// Registered first, run last: whatever Start left is removed even
	// if it fails half-way.
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := dockercluster.Remove(cctx, "docker", name); err != nil {
			t.Errorf("cannot clean up: %v", err)
		}
	})
	cfg.Name, cfg.Dir, cfg.KgateBin, cfg.Images = name, t.TempDir(), bin, dockercluster.DefaultImages(tag)
	if cfg.Logger == nil {
		cfg.Logger = Logger(t)
	}
	t0 := time.Now()
	c, err := dockercluster.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("cannot start the cluster: %v", err)
	}
	t.Logf("cluster %s ready in %v: gateways at %v", name, time.Since(t0).Round(time.Second), c.GatewayAddrs())
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir, err := os.MkdirTemp("", name+"-logs-")
		if err != nil {
			t.Logf("cannot keep logs: %v", err)
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		tails, err := c.DumpLogs(cctx, dir, 40)
		t.Logf("logs of every container (%v):\n%s", err, tails)
	})
	return c
}

// Logger logs at Info to t's output.
func Logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}
