package suite

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/bench/internal/report"
	"github.com/kgate/kgate/bench/internal/scenario"
	"github.com/kgate/kgate/bench/internal/seed"
	"github.com/kgate/kgate/bench/internal/target"
)

func config(t *testing.T) Config {
	return Config{
		Runs:     1,
		Defaults: scenario.Defaults{Common: scenario.Common{Concurrency: 2, Duration: 300 * time.Millisecond}, Watchers: 2, WatchEvents: 20, Informers: 1, MemoryPods: 20, ConfigMapBytes: 256},
		Seed:     seed.Layout{Namespaces: 2, Pods: 20, ConfigMaps: 4, ConfigMapBytes: 256},
		OutDir:   t.TempDir(),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func TestNewValidates(t *testing.T) {
	f := func(mut func(*Config), wantErr string) {
		t.Helper()
		cfg := config(t)
		cfg.Targets = []target.Config{{Kubeconfig: "k"}}
		mut(&cfg)
		_, err := New(cfg)
		if (err == nil) != (wantErr == "") || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("New: %v, want error %q", err, wantErr)
		}
	}
	f(func(*Config) {}, "")
	f(func(c *Config) { c.Targets = nil }, "kubeconfig or a kgate binary")
	f(func(c *Config) { c.Targets = make([]target.Config, 3) }, "at most two targets")
	f(func(c *Config) { c.Specs = []string{"get", "get,rv=rv0"} }, "given twice")
	f(func(c *Config) { c.Specs = []string{"teleport"} }, "unknown kind")
	f(func(c *Config) { c.Seed.Pods = 0 }, "at least one")
	f(func(c *Config) { c.Logger = nil }, "Logger")
}

// TestAgainstKgateDev runs a tiny suite of every kind against the kgate
// binary in KGATE_BIN (make test sets it).
func TestAgainstKgateDev(t *testing.T) {
	bin := os.Getenv("KGATE_BIN")
	if testing.Short() || bin == "" {
		t.Skip("needs KGATE_BIN (a built kgate) and no -short")
	}
	cfg := config(t)
	cfg.StartKgate = bin
	cfg.Specs = []string{"get,rv=rv0", "list,variants=ns/consistent/paged/proto,limit=3", "list,variants=cluster/rv0/all/json,decode=false",
		"watch", "write,ops=create+update", "mixed,rate=20", "etcd,ops=txn-update+range-ns", "memory"}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	files, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Load(files.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Scenarios) != 10 || len(files.Plots) < 10 {
		t.Fatalf("%d scenarios, %d plots", len(r.Scenarios), len(files.Plots))
	}
	for _, sc := range r.Scenarios {
		for _, tr := range sc.Results {
			ops := tr.Figures[report.OpsPerS]
			if tr.Skipped != "" || ops.Median <= 0 || tr.Figures[report.Errors].Median != 0 {
				t.Errorf("%s on %s: skipped %q, ops/s %+v, errors %v %v", sc.Name, tr.Target, tr.Skipped, ops, tr.Errors, tr.Examples)
			}
			if _, ok := tr.Figures[report.ServerCPUPerOp]; !ok {
				t.Errorf("%s: no server CPU although kgate's pid is known", sc.Name)
			}
		}
	}
	md, _ := os.ReadFile(files.Markdown)
	for _, want := range []string{"| list/ns/consistent/paged/proto | kgate |", "| watch-fanout/2w/1c | kgate | lost_events | 0 |", "| memory | kgate | json_bytes_per_object |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("%s", md)
	}
}
