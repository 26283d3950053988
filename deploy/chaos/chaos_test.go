package chaos_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kgate/kgate/deploy/chaos"
	"github.com/kgate/kgate/deploy/chaos/report"
	"github.com/kgate/kgate/deploy/dockercluster"
	"github.com/kgate/kgate/deploy/dockercluster/dockerclustertest"
)

// TestChaos runs the fault suite on a Docker cluster of 3 etcd members,
// 3 NATS servers, 3 cache nodes (two replicas per range) and 3 gateways:
// make chaos (CHAOS_DURATION=10m, every fault) and, from .ci/run, make
// chaos-smoke (3 minutes, a few faults). CHAOS_SEED reproduces a run's
// fault order and workload; CHAOS_FAULTS keeps the faults whose names
// match; CHAOS_RESULTS is where the report goes. Every violation the
// checkers find fails the test.
func TestChaos(t *testing.T) {
	dur := envDuration(t, "CHAOS_DURATION", 10*time.Minute)
	hold := envDuration(t, "CHAOS_HOLD", 15*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), dur+20*time.Minute)
	defer cancel()
	if err := dockercluster.NetNSAvailable(); err != nil {
		t.Fatalf("the faults need the host's tools: %v", err)
	}
	c := dockerclustertest.Start(t, ctx, "KGATE_CHAOS_TEST", dockercluster.Config{Gateways: 3})
	seed := time.Now().UnixNano()
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED: %v", err)
		}
	}
	t.Logf("CHAOS_SEED=%d", seed)
	var only *regexp.Regexp
	if s := os.Getenv("CHAOS_FAULTS"); s != "" {
		var err error
		if only, err = regexp.Compile(s); err != nil {
			t.Fatalf("CHAOS_FAULTS: %v", err)
		}
	}
	results := os.Getenv("CHAOS_RESULTS")
	if results == "" {
		results = t.TempDir()
	}
	run, err := chaos.Run(ctx, chaos.Config{
		Cluster: c, Seed: seed, Duration: dur, Hold: hold, Faults: only, Results: results,
		Logger: dockerclustertest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range run.Faults {
		k := f.Checks
		t.Logf("%-60s heal %-8v requests %5d failed %4d events %6d lost/dup/reord %d/%d/%d writes %5d lost/twice/409 %d/%d/%d reads %5d lin %s stale %d relists %d",
			f.Name, heal(f), k.Requests, k.Failed, k.Events, k.Lost, k.Duplicated, k.Reordered,
			k.Writes, k.WritesLost, k.WritesTwice, k.FalseConflicts, k.Reads, k.Linearizable, k.StaleReads, k.Relists)
	}
	t.Logf("report in %s (CHAOS_SEED=%d)", results, seed)
	for _, p := range run.Problems {
		t.Errorf("%s", p)
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func heal(f report.Fault) string {
	if f.Recovered.IsZero() {
		return "never"
	}
	return f.Recovered.Sub(f.Healed).Round(time.Millisecond).String()
}
