package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixture is two targets, two scenarios, three runs each.
func fixture() *Results {
	run := func(ops, p50, p99 float64, errs int64) Run {
		r := Run{
			Figures:    map[string]float64{OpsPerS: ops, P50: p50, P90: p50 * 2, P99: p99, Max: p99 * 2, Errors: float64(errs)},
			Throughput: []float64{ops * 0.9, ops * 1.1, ops},
			IntervalS:  0.5,
		}
		if errs > 0 {
			r.Errors = map[string]int64{"409 Conflict": errs}
		}
		return r
	}
	cdf := []CDFPoint{{0.5, 1}, {0.9, 2}, {0.99, 5}, {1, 9}}
	started := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	r := &Results{
		Schema: SchemaVersion, Started: started, Finished: started.Add(90 * time.Second), Runs: 3,
		Command: []string{"kgate-bench", "--runs", "3"},
		Host:    Host{Hostname: "box", CPUs: 2, OS: "linux", Arch: "amd64", GoVersion: "go1.26"},
		Targets: []Target{
			{Name: "kgate", Server: "https://127.0.0.1:1", Pids: []int{42}, Seed: &Seed{Namespaces: 2, Pods: 100, PodJSONBytes: 4754, Created: 100}},
			{Name: "kube-apiserver", Server: "https://127.0.0.1:2"},
		},
		Scenarios: []Scenario{
			{
				Name: "get/rv0", Kind: "get", Description: "GET a pod", Params: map[string]string{"concurrency": "8"},
				Results: []TargetResult{
					{Target: "kgate", CDF: cdf, Runs: []Run{run(1000, 1, 5, 0), run(1200, 0.8, 4, 0), run(1100, 0.9, 6, 0)}},
					{Target: "kube-apiserver", CDF: cdf, Runs: []Run{run(500, 2, 10, 1), run(600, 2, 8, 0), run(550, 2, 9, 2)}},
				},
			},
			{
				Name: "memory", Kind: "memory", Description: "load pods",
				Results: []TargetResult{
					{Target: "kgate", Runs: []Run{
						{Figures: map[string]float64{OpsPerS: 300, "heap_bytes_per_object": 9000}},
						{Figures: map[string]float64{OpsPerS: 310, "heap_bytes_per_object": 9500, "rss_mb": math.NaN()}},
						{Figures: map[string]float64{OpsPerS: 290, "heap_bytes_per_object": 8000}},
					}},
					{Target: "kube-apiserver", Skipped: "no pids"},
				},
			},
		},
		Notes: []string{"a note"},
	}
	for i := range r.Scenarios {
		for j := range r.Scenarios[i].Results {
			r.Scenarios[i].Results[j].Summarize()
		}
		r.Scenarios[i].Compare()
	}
	return r
}

func TestSummarizeAndCompare(t *testing.T) {
	r := fixture()
	k := r.Scenarios[0].Results[0]
	if s := k.Figures[OpsPerS]; s.Median != 1100 || s.Min != 1000 || s.Max != 1200 || s.N != 3 {
		t.Fatalf("ops/s spread %+v", s)
	}
	ka := r.Scenarios[0].Results[1]
	if ka.Errors["409 Conflict"] != 3 {
		t.Fatalf("errors %v", ka.Errors)
	}
	// Ratios are per run: 500/1000, 600/1200, 550/1100 — all 0.5.
	if s := r.Scenarios[0].Ratios[OpsPerS]; s.Median != 0.5 || s.Min != 0.5 || s.Max != 0.5 {
		t.Fatalf("ops/s ratio %+v", s)
	}
	if s := r.Scenarios[0].Ratios[P50]; math.Abs(s.Median-2/0.9) > 1e-9 || s.Min != 2 || math.Abs(s.Max-2.5) > 1e-9 {
		t.Fatalf("p50 ratio %+v", s)
	}
	if r.Scenarios[1].Ratios != nil {
		t.Fatalf("a skipped target has ratios: %v", r.Scenarios[1].Ratios)
	}
	if s := r.Scenarios[1].Results[0].Figures["rss_mb"]; s.N != 0 {
		t.Fatalf("NaN-only figure has a spread: %+v", s)
	}
	if i := k.MedianRun(); i != 2 {
		t.Fatalf("median run %d, want 2 (1100 ops/s)", i)
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := Markdown(&b, fixture(), []Plot{{Title: "get: latency CDF", File: "cdf-get.png"}}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"# kgate-bench — 2026-11-21 10:00:00 UTC",
		"Each figure is the median of 3 runs",
		"| kgate | https://127.0.0.1:1 | - | 42 | 100 pods (4754 B JSON each)",
		"| scenario | target | ops/s | p50 ms | p90 ms | p99 ms | max ms | errors | server CPU ms/op | server RSS MB | client CPU ms/op |",
		"| get/rv0 | kgate | 1100 [1000–1200] | 0.9 [0.8–1.00] | 1.80 [1.60–2.00] | 5.00 [4.00–6.00] | 10.0 [8.00–12.0] | 0 | - | - | - |",
		"| get/rv0 | kube-apiserver | 550 [500–600] |",
		"| memory | kube-apiserver | skipped: no pids |",
		"| memory | kgate | heap_bytes_per_object | 9000 [8000–9500] |",
		"## Comparison: kube-apiserver / kgate",
		"| get/rv0 | 0.50× [0.50–0.50] | 2.22× [2.00–2.50] |",
		"| get/rv0 | kube-apiserver | 409 Conflict | 3 |",
		"- **get/rv0**: GET a pod (concurrency=8)",
		"![get: latency CDF](cdf-get.png)",
		"- a note",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	// Every table row has as many cells as its header.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| get/rv0 | kgate | 1100") && strings.Count(line, "|") != 12 {
			t.Errorf("row has %d bars: %q", strings.Count(line, "|"), line)
		}
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1234.5: "1234", 12.345: "12.3", 1.2345: "1.23", 0.012345: "0.0123", -5: "-5.00"} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestWriteAndLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := fixture()
	files, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	// A CDF and a throughput plot for get; memory has neither.
	if len(files.Plots) != 2 {
		t.Fatalf("plots %v", files.Plots)
	}
	for _, p := range files.Plots {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("%s is not a PNG (%v)", p, err)
		}
	}
	md, err := os.ReadFile(files.Markdown)
	if err != nil || !strings.Contains(string(md), "(cdf-get.png)") || !strings.Contains(string(md), "(throughput-get.png)") {
		t.Fatalf("results.md does not link the plots (%v)", err)
	}
	back, err := Load(files.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Scenarios) != 2 || back.Scenarios[0].Results[1].Figures[OpsPerS].Median != 550 ||
		back.Scenarios[0].Ratios[OpsPerS].Median != 0.5 || back.Scenarios[0].Results[0].CDF[3].Ms != 9 {
		t.Fatalf("round trip lost data: %+v", back.Scenarios[0])
	}
	if _, ok := back.Scenarios[1].Results[0].Runs[1].Figures["rss_mb"]; ok {
		t.Fatal("NaN figure was written")
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}
