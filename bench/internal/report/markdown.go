package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/kgate/kgate/bench/internal/stats"
)

// headers name the Standard figures in the main table.
var headers = map[string]string{
	OpsPerS: "ops/s", P50: "p50 ms", P90: "p90 ms", P99: "p99 ms", Max: "max ms",
	Errors: "errors", ServerCPUPerOp: "server CPU ms/op", ServerRSS: "server RSS MB", ClientCPUPerOp: "client CPU ms/op",
}

// Markdown writes the report: the main table (median [min–max] over
// runs), scenario figures, comparison ratios, errors, plots and notes.
func Markdown(w io.Writer, r *Results, plots []Plot) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# kgate-bench — %s\n\n", r.Started.UTC().Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(&b, "Host: %s, %d CPUs, %s/%s, %s. Each figure is the median of %d runs, with [min–max]. Took %s.\n\n",
		r.Host.Hostname, r.Host.CPUs, r.Host.OS, r.Host.Arch, r.Host.GoVersion, r.Runs, r.Finished.Sub(r.Started).Round(1e9))
	if len(r.Command) > 0 {
		fmt.Fprintf(&b, "Command: `%s`\n\n", strings.Join(r.Command, " "))
	}
	b.WriteString("| target | server | version | pids | seeded |\n|---|---|---|---|---|\n")
	for _, t := range r.Targets {
		seeded := "-"
		if s := t.Seed; s != nil {
			seeded = fmt.Sprintf("%d pods (%.0f B JSON each) + %d ConfigMaps (%d B) in %d namespaces; %d written, %d existed, %d failed in %.1fs",
				s.Pods, s.PodJSONBytes, s.ConfigMaps, s.ConfigMapBytes, s.Namespaces, s.Created, s.Existing, s.Failed, s.Seconds)
		}
		pids := "-"
		if len(t.Pids) > 0 {
			pids = strings.Trim(fmt.Sprint(t.Pids), "[]")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", t.Name, t.Server, dash(t.Version), pids, seeded)
	}

	b.WriteString("\n## Results\n\n| scenario | target |")
	for _, f := range Standard {
		fmt.Fprintf(&b, " %s |", headers[f])
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(Standard)) + "\n")
	for _, s := range r.Scenarios {
		for _, tr := range s.Results {
			fmt.Fprintf(&b, "| %s | %s |", s.Name, tr.Target)
			if tr.Skipped != "" {
				fmt.Fprintf(&b, " skipped: %s |%s\n", tr.Skipped, strings.Repeat(" |", len(Standard)-1))
				continue
			}
			for _, f := range Standard {
				fmt.Fprintf(&b, " %s |", cell(tr.Figures, f))
			}
			b.WriteString("\n")
		}
	}

	var extra strings.Builder
	for _, s := range r.Scenarios {
		for _, tr := range s.Results {
			for _, f := range extraFigures(tr.Figures) {
				fmt.Fprintf(&extra, "| %s | %s | %s | %s |\n", s.Name, tr.Target, f, cell(tr.Figures, f))
			}
		}
	}
	if extra.Len() > 0 {
		b.WriteString("\n## Scenario figures\n\n| scenario | target | figure | median [min–max] |\n|---|---|---|---:|\n")
		b.WriteString(extra.String())
	}

	var cmp strings.Builder
	for _, s := range r.Scenarios {
		if len(s.Ratios) == 0 {
			continue
		}
		fmt.Fprintf(&cmp, "| %s |", s.Name)
		for _, f := range []string{OpsPerS, P50, P99, ServerCPUPerOp} {
			fmt.Fprintf(&cmp, " %s |", ratioCell(s.Ratios, f))
		}
		cmp.WriteString("\n")
	}
	if cmp.Len() > 0 && len(r.Targets) >= 2 {
		fmt.Fprintf(&b, "\n## Comparison: %s / %s\n\nRatios of run i of both targets (run back to back), median [min–max].\n\n", r.Targets[1].Name, r.Targets[0].Name)
		b.WriteString("| scenario | ops/s | p50 | p99 | server CPU/op |\n|---|---:|---:|---:|---:|\n")
		b.WriteString(cmp.String())
	}

	var errs strings.Builder
	for _, s := range r.Scenarios {
		for _, tr := range s.Results {
			for _, code := range slices.Sorted(maps.Keys(tr.Errors)) {
				ex := tr.Examples[code]
				if len(ex) > 120 {
					ex = ex[:117] + "..."
				}
				fmt.Fprintf(&errs, "| %s | %s | %s | %d | %s |\n", s.Name, tr.Target, code, tr.Errors[code], escape(ex))
			}
		}
	}
	if errs.Len() > 0 {
		b.WriteString("\n## Errors\n\n| scenario | target | code | count | example |\n|---|---|---|---:|---|\n")
		b.WriteString(errs.String())
	}

	b.WriteString("\n## Scenarios\n\n")
	for _, s := range r.Scenarios {
		keys := slices.Sorted(maps.Keys(s.Params))
		var ps []string
		for _, k := range keys {
			ps = append(ps, k+"="+s.Params[k])
		}
		fmt.Fprintf(&b, "- **%s**: %s (%s)\n", s.Name, s.Description, strings.Join(ps, ", "))
	}
	if len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n", p.Title, p.File)
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell is "median [min–max]", or the median alone when all runs agree, or
// "-" when no run measured the figure.
func cell(figs map[string]stats.Spread, name string) string {
	s, ok := figs[name]
	if !ok || s.N == 0 {
		return "-"
	}
	if s.Min == s.Max {
		return Num(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", Num(s.Median), Num(s.Min), Num(s.Max))
}

func ratioCell(rs map[string]stats.Spread, name string) string {
	s, ok := rs[name]
	if !ok || s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", s.Median, s.Min, s.Max)
}

// Num formats with about three significant digits.
func Num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func escape(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
