package report

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{850 * time.Millisecond, "850ms"},
		{1400 * time.Microsecond, "1ms"},
		{12340 * time.Millisecond, "12.3s"},
		{45 * time.Second, "45s"},
		{59970 * time.Millisecond, "1m00s"},
		{65 * time.Second, "1m05s"},
		{time.Hour + 2*time.Minute + 5*time.Second, "1h02m05s"},
		{-1500 * time.Millisecond, "-1.5s"},
	} {
		if got := formatDuration(tc.d); got != tc.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestFormatOffset(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "+0s"},
		{400 * time.Millisecond, "+0s"},
		{45 * time.Second, "+45s"},
		{65*time.Second + 200*time.Millisecond, "+1m05s"},
		{-2 * time.Second, "-2s"},
	} {
		if got := formatOffset(t0, t0.Add(tc.d)); got != tc.want {
			t.Errorf("formatOffset(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestFormatFailed(t *testing.T) {
	for _, tc := range []struct {
		failed, requests int
		want             string
	}{
		{0, 0, "0 (n/a)"},
		{0, 10, "0 (0.00%)"},
		{1, 3, "1 (33.33%)"},
		{2, 3, "2 (66.67%)"},
		{5, 5, "5 (100.00%)"},
	} {
		if got := formatFailed(tc.failed, tc.requests); got != tc.want {
			t.Errorf("formatFailed(%d, %d) = %q, want %q", tc.failed, tc.requests, got, tc.want)
		}
	}
}

func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"kill -9 cachenode-1":   "kill -9 cachenode-1",
		"a | b":                 `a \| b`,
		"two\nlines  and\tmore": "two lines and more",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"kill -9 cachenode-1", 10, "kill -9..."},
		{"ünïcödé strings", 8, "ünïcö..."},
	} {
		if got := truncate(tc.s, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     Run
		pass    bool
		reasons []string
	}{
		{"empty", Run{}, true, nil},
		{"clean", Run{
			Faults: []Fault{{Checks: Checks{Requests: 10, Failed: 3, Linearizable: "ok"}}},
			Totals: Checks{Requests: 10, Failed: 3, Linearizable: "ok"},
		}, true, nil},
		{"problem", Run{Problems: []string{"lost event"}}, false, []string{"1 problem"}},
		{"window violation", Run{
			Faults: []Fault{{Checks: Checks{Duplicated: 1}}, {Checks: Checks{Relists: 2}}},
		}, false, []string{"violations in 2 fault windows"}},
		{"window not linearizable", Run{
			Faults: []Fault{{Checks: Checks{Linearizable: "violation"}}},
		}, false, []string{"violations in 1 fault window"}},
		{"totals", Run{Totals: Checks{WritesLost: 1, StaleReads: 1, Linearizable: "unknown"}},
			false, []string{"2 violations in the whole run", "linearizability unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pass, reasons := verdict(&tc.run)
			if pass != tc.pass || !slices.Equal(reasons, tc.reasons) {
				t.Errorf("verdict = %v %q, want %v %q", pass, reasons, tc.pass, tc.reasons)
			}
		})
	}
}

func TestBucketRequests(t *testing.T) {
	at := func(d time.Duration, failed bool) Request {
		return Request{End: t0.Add(d), Failed: failed}
	}
	for _, tc := range []struct {
		name       string
		length     time.Duration
		reqs       []Request
		ok, failed []int
	}{
		{"empty", 2500 * time.Millisecond, nil, []int{0, 0, 0}, []int{0, 0, 0}},
		{"bins", 2 * time.Second, []Request{
			at(0, false), at(999*time.Millisecond, true), at(time.Second, false), at(1500*time.Millisecond, false),
		}, []int{1, 2}, []int{1, 0}},
		{"before start dropped", time.Second, []Request{at(-time.Millisecond, true)}, []int{0}, []int{0}},
		{"after end extends", time.Second, []Request{at(2*time.Second, true)}, []int{0, 0, 0}, []int{0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, failed := bucketRequests(t0, tc.length, tc.reqs)
			if !slices.Equal(ok, tc.ok) || !slices.Equal(failed, tc.failed) {
				t.Errorf("bucketRequests = %v %v, want %v %v", ok, failed, tc.ok, tc.failed)
			}
		})
	}
}

func TestErrorRateXYs(t *testing.T) {
	got := errorRateXYs([]int{3, 0, 0}, []int{1, 0, 2})
	want := plotter.XYs{{X: 0.5, Y: 25}, {X: 2.5, Y: 100}}
	if !slices.Equal(got, want) {
		t.Errorf("errorRateXYs = %v, want %v", got, want)
	}
}

func TestQuantile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		ds := make([]time.Duration, len(ns))
		for i, n := range ns {
			ds[i] = time.Duration(n) * time.Millisecond
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{nil, 0.99, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.99, 4 * time.Millisecond},
		{ms(hundred...), 0.99, 99 * time.Millisecond},
		{ms(1, 2), 0, time.Millisecond},
	} {
		if got := quantile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.sorted, tc.q, got, tc.want)
		}
	}
}

func TestLagP99(t *testing.T) {
	lag := func(g int, at, d time.Duration) Lag {
		return Lag{Gateway: g, At: t0.Add(at), Lag: d}
	}
	got := lagP99(t0, []Lag{
		lag(2, 1500*time.Millisecond, 30*time.Millisecond),
		lag(0, 100*time.Millisecond, 10*time.Millisecond),
		lag(0, 200*time.Millisecond, 20*time.Millisecond),
		lag(-1, 0, time.Second),
		lag(0, -time.Second, time.Hour), // before the start
	})
	want := []gatewayLag{
		{-1, plotter.XYs{{X: 0.5, Y: 1000}}},
		{0, plotter.XYs{{X: 0.5, Y: 20}}},
		{2, plotter.XYs{{X: 1.5, Y: 30}}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lagP99 = %v, want %v", got, want)
	}
}

func TestFaultSpans(t *testing.T) {
	r := &Run{Started: t0, Ended: t0.Add(time.Minute), Faults: []Fault{
		{Name: "a", Injected: t0.Add(5 * time.Second), Healed: t0.Add(10 * time.Second), Recovered: t0.Add(12 * time.Second)},
		{Name: "b", Injected: t0.Add(20 * time.Second), Healed: t0.Add(25 * time.Second)},
		{Name: "c", Injected: t0.Add(50 * time.Second)},
	}}
	want := []span{{"1: a", 5, 12}, {"2: b", 20, 25}, {"3: c", 50, 60}}
	if got := faultSpans(r); !slices.Equal(got, want) {
		t.Errorf("faultSpans = %v, want %v", got, want)
	}
}

// syntheticRun is a 90 s run against 3 gateways with two faults: the
// first makes a third of the requests fail and slows watches, the second
// never recovers.
func syntheticRun() *Run {
	r := &Run{
		Seed:    42,
		Cluster: "3 etcd, 3 NATS, 3 cache nodes (R=2), 3 gateways",
		Started: t0,
		Ended:   t0.Add(90 * time.Second),
		Faults: []Fault{{
			Name:     "kill -9 cachenode-1, restart",
			Injected: t0.Add(20 * time.Second), Healed: t0.Add(35 * time.Second), Recovered: t0.Add(37*time.Second + 400*time.Millisecond),
			Checks: Checks{Requests: 600, Failed: 13, Events: 900, Writes: 200, Reads: 150, Linearizable: "ok"},
		}, {
			Name:     "partition gateway-2 | NATS",
			Injected: t0.Add(65 * time.Second), Healed: t0.Add(80 * time.Second),
			Checks: Checks{Requests: 500, Events: 700, Writes: 150, Reads: 100, Linearizable: "ok"},
		}},
		Totals: Checks{Requests: 3600, Failed: 13, Events: 5400, Writes: 1200, Reads: 900, Linearizable: "ok"},
	}
	for i := range 3600 {
		at := time.Duration(i) * 25 * time.Millisecond
		fault := at >= 20*time.Second && at < 37*time.Second
		r.Requests = append(r.Requests, Request{
			Kind: "get", Gateway: i % 3,
			Start: t0.Add(at), End: t0.Add(at + 5*time.Millisecond),
			Failed: fault && i%3 == 0,
		})
		lag := time.Duration(5+i%7) * time.Millisecond
		if fault {
			lag *= 40
		}
		r.Lags = append(r.Lags, Lag{Gateway: i % 3, At: t0.Add(at), Lag: lag})
	}
	return r
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		problems []string
		want     string
	}{
		{"pass", nil, "**Verdict: PASS**"},
		{"fail", []string{"watch gateway-1: event rv=1234 lost"}, "**Verdict: FAIL** (1 problem)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := syntheticRun()
			r.Problems = tc.problems
			dir := filepath.Join(t.TempDir(), "out")
			if err := Write(dir, r); err != nil {
				t.Fatal(err)
			}
			md, err := os.ReadFile(filepath.Join(dir, SummaryFile))
			if err != nil {
				t.Fatal(err)
			}
			summary := string(md)
			for _, s := range []string{
				tc.want,
				"| Started | 2025-03-01T12:00:00Z |",
				"| Duration | 1m30s |",
				"| 1 | kill -9 cachenode-1, restart | +20s | 15s | 2.4s | 600 | 13 (2.17%) | 900 | 0/0/0 | 200 | 0/0/0 | 150 | ok | 0 | 0 |",
				`| 2 | partition gateway-2 \| NATS | +1m05s | 15s | not recovered | 500 | 0 (0.00%) |`,
				"|  | **Whole run** | +0s | 1m30s | - | 3600 | 13 (0.36%) |",
				"(throughput.png)",
				"(lag.png)",
			} {
				if !strings.Contains(summary, s) {
					t.Errorf("summary.md lacks %q:\n%s", s, summary)
				}
			}
			if tc.problems == nil && (strings.Contains(summary, "FAIL") || !strings.Contains(summary, "## Problems\n\nnone\n")) {
				t.Errorf("summary.md of a passing run:\n%s", summary)
			}
			for _, p := range tc.problems {
				if !strings.Contains(summary, "- "+p+"\n") {
					t.Errorf("summary.md lacks problem %q", p)
				}
			}
			for _, name := range []string{ThroughputFile, LagFile} {
				f, err := os.Open(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				img, err := png.Decode(f)
				f.Close()
				if err != nil {
					t.Fatalf("cannot decode %s: %v", name, err)
				}
				if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
					t.Errorf("%s is %v", name, b)
				}
			}
		})
	}
}

func TestWriteDeterministic(t *testing.T) {
	r := syntheticRun()
	// Requests and lags in another order render the same files.
	shuffled := syntheticRun()
	slices.Reverse(shuffled.Requests)
	slices.Reverse(shuffled.Lags)
	a, b := t.TempDir(), t.TempDir()
	if err := Write(a, r); err != nil {
		t.Fatal(err)
	}
	if err := Write(b, shuffled); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SummaryFile, ThroughputFile, LagFile} {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two renderings of the same run", name)
		}
	}
}

func TestWriteEmptyRun(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, &Run{Started: t0, Ended: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, nil); err == nil {
		t.Error("Write(nil) succeeded")
	}
}
