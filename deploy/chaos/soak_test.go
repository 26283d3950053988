package chaos_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kgate/kgate/deploy/chaos"
	"github.com/kgate/kgate/deploy/dockercluster"
	"github.com/kgate/kgate/deploy/dockercluster/dockerclustertest"
)

// TestSoak runs make soak: an hour of 500 writes/s and 10,000 watchers on
// the Docker cluster (SOAK_DURATION, SOAK_WATCHERS, SOAK_WRITES scale
// it), every component's memory and goroutines sampled every minute
// (SOAK_SAMPLE); it fails if a watcher missed an event of its shard or a
// component did not stay flat. soak.md goes to SOAK_RESULTS.
func TestSoak(t *testing.T) {
	dur := envDuration(t, "SOAK_DURATION", time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), dur+30*time.Minute)
	defer cancel()
	c := dockerclustertest.Start(t, ctx, "KGATE_SOAK_TEST", dockercluster.Config{Gateways: 3})
	results := os.Getenv("SOAK_RESULTS")
	if results == "" {
		results = t.TempDir()
	}
	cfg := chaos.SoakConfig{Cluster: c, Duration: dur, Sample: envDuration(t, "SOAK_SAMPLE", time.Minute), Results: results, Seed: time.Now().UnixNano(), Logger: dockerclustertest.Logger(t)}
	if s := os.Getenv("SOAK_WATCHERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SOAK_WATCHERS: %v", err)
		}
		cfg.Watchers = n
	}
	if s := os.Getenv("SOAK_WRITES"); s != "" {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("SOAK_WRITES: %v", err)
		}
		cfg.WritesPerSecond = n
	}
	res, err := chaos.Soak(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes, %d events delivered; report in %s/soak.md", res.Writes, res.Events, results)
	for _, p := range res.Problems {
		t.Errorf("%s", p)
	}
}
