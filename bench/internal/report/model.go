// Package report is the harness's result model and its renderings: JSON
// (results.json, from which everything else can be redrawn), a Markdown
// table (results.md) and PNG plots — latency CDFs and throughput over
// time — drawn with gonum/plot.
package report

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/kgate/kgate/bench/internal/stats"
)

// Figure names every run reports; scenarios add their own.
const (
	OpsPerS        = "ops_per_s"
	P50            = "p50_ms"
	P90            = "p90_ms"
	P99            = "p99_ms"
	Max            = "max_ms"
	Errors         = "errors"
	Missed         = "missed"
	ServerCPUPerOp = "server_cpu_ms_per_op"
	ServerCPUPerS  = "server_cpu_cores"
	ServerRSS      = "server_rss_mb"
	ClientCPUPerOp = "client_cpu_ms_per_op"
)

// SchemaVersion is Results.Schema of what this package writes.
const SchemaVersion = 1

// Standard are the figures of the main table, in column order.
var Standard = []string{OpsPerS, P50, P90, P99, Max, Errors, ServerCPUPerOp, ServerRSS, ClientCPUPerOp}

// Results is one harness invocation.
type Results struct {
	Schema    int        `json:"schema"`
	Started   time.Time  `json:"started"`
	Finished  time.Time  `json:"finished"`
	Command   []string   `json:"command"`
	Host      Host       `json:"host"`
	Runs      int        `json:"runs"`
	Targets   []Target   `json:"targets"`
	Scenarios []Scenario `json:"scenarios"`
	Notes     []string   `json:"notes,omitempty"`
}

// Host is the machine the harness ran on.
type Host struct {
	Hostname  string `json:"hostname"`
	CPUs      int    `json:"cpus"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	GoVersion string `json:"go_version"`
}

// Target is a server under test.
type Target struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Server     string `json:"server"`
	Version    string `json:"version,omitempty"`
	Pids       []int  `json:"pids,omitempty"`
	Seed       *Seed  `json:"seed,omitempty"`
}

// Seed is the seeded data set as written through a target.
type Seed struct {
	Namespaces     int     `json:"namespaces"`
	Pods           int     `json:"pods"`
	ConfigMaps     int     `json:"configmaps"`
	ConfigMapBytes int     `json:"configmap_bytes"`
	Created        int     `json:"created"`
	Existing       int     `json:"existing"`
	Failed         int     `json:"failed"`
	PodJSONBytes   float64 `json:"pod_json_bytes"`
	Seconds        float64 `json:"seconds"`
}

// Scenario is one workload's results on every target.
type Scenario struct {
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	Description string            `json:"description"`
	Params      map[string]string `json:"params"`
	Results     []TargetResult    `json:"results"`
	// Ratios are, per figure, results[1] / results[0] computed run by
	// run (run i of both targets ran back to back).
	Ratios map[string]stats.Spread `json:"ratios,omitempty"`
}

// TargetResult is one scenario on one target.
type TargetResult struct {
	Target string `json:"target"`
	// Skipped says why the scenario did not run (then nothing else is set).
	Skipped string `json:"skipped,omitempty"`
	// Figures are the median, min and max over runs.
	Figures map[string]stats.Spread `json:"figures,omitempty"`
	// Errors sum the runs' errors by code; Examples hold a message each.
	Errors   map[string]int64  `json:"errors,omitempty"`
	Examples map[string]string `json:"error_examples,omitempty"`
	// CDF is the latency distribution of every run together (ms).
	CDF  []CDFPoint `json:"latency_cdf,omitempty"`
	Runs []Run      `json:"runs,omitempty"`
}

// CDFPoint is one point of a latency CDF.
type CDFPoint struct {
	Q  float64 `json:"q"`
	Ms float64 `json:"ms"`
}

// Run is one run's measurements.
type Run struct {
	Figures map[string]float64 `json:"figures"`
	Errors  map[string]int64   `json:"errors,omitempty"`
	// Throughput is successful operations per second in consecutive
	// intervals of IntervalS seconds.
	Throughput []float64 `json:"throughput,omitempty"`
	IntervalS  float64   `json:"interval_s,omitempty"`
}

// Summarize sets Figures (median, min, max over runs) and Errors of r
// from r.Runs.
func (r *TargetResult) Summarize() {
	names := map[string]bool{}
	for _, run := range r.Runs {
		for k := range run.Figures {
			names[k] = true
		}
	}
	r.Figures = map[string]stats.Spread{}
	for name := range names {
		r.Figures[name] = stats.Of(r.values(name))
	}
	r.Errors = nil
	for _, run := range r.Runs {
		for k, v := range run.Errors {
			if r.Errors == nil {
				r.Errors = map[string]int64{}
			}
			r.Errors[k] += v
		}
	}
}

// values are a figure's values run by run (NaN where a run lacks it).
func (r *TargetResult) values(name string) []float64 {
	out := make([]float64, len(r.Runs))
	for i, run := range r.Runs {
		v, ok := run.Figures[name]
		if !ok {
			v = nan()
		}
		out[i] = v
	}
	return out
}

// Compare sets s.Ratios from the first two targets' runs.
func (s *Scenario) Compare() {
	s.Ratios = nil
	if len(s.Results) < 2 || s.Results[0].Skipped != "" || s.Results[1].Skipped != "" {
		return
	}
	a, b := &s.Results[0], &s.Results[1]
	s.Ratios = map[string]stats.Spread{}
	for name := range a.Figures {
		if _, ok := b.Figures[name]; !ok {
			continue
		}
		if sp := stats.Ratios(a.values(name), b.values(name)); sp.N > 0 {
			s.Ratios[name] = sp
		}
	}
}

// MedianRun is the index of the run whose throughput is the median (for
// the throughput-over-time plot), -1 without runs.
func (r *TargetResult) MedianRun() int {
	if len(r.Runs) == 0 {
		return -1
	}
	idx := make([]int, len(r.Runs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		x, y := r.Runs[a].Figures[OpsPerS], r.Runs[b].Figures[OpsPerS]
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return idx[(len(idx)-1)/2]
}

// extraFigures are a result's figures beyond Standard, sorted.
func extraFigures(figs map[string]stats.Spread) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(figs)) {
		if !slices.Contains(Standard, k) {
			out = append(out, k)
		}
	}
	return out
}

func nan() float64 { return math.NaN() }
