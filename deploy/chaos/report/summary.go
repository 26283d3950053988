package report

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// faultColumns head the fault table: the window's own cells (number,
// name, offset, duration, heal time), then one per checksRow cell.
func faultColumns() []string {
	return []string{
		"#", "Fault", "Injected", "Duration", "Heal time",
		"Requests", "Failed", "Events", "Lost/dup/reordered",
		"Writes", "Lost/twice/false 409", "Reads", "Linearizable",
		"Stale rv=0 reads", "Relists",
	}
}

// writeSummary renders r as the Markdown of summary.md.
func writeSummary(b *bytes.Buffer, r *Run) {
	fmt.Fprintf(b, "# Chaos run, seed %d\n\n", r.Seed)
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(b, "| Seed | %d |\n", r.Seed)
	fmt.Fprintf(b, "| Cluster | %s |\n", cell(orDash(r.Cluster)))
	fmt.Fprintf(b, "| Started | %s |\n", formatTime(r.Started))
	fmt.Fprintf(b, "| Ended | %s |\n", formatTime(r.Ended))
	fmt.Fprintf(b, "| Duration | %s |\n", formatDuration(r.Ended.Sub(r.Started)))
	fmt.Fprintf(b, "| Faults | %d |\n\n", len(r.Faults))

	if pass, reasons := verdict(r); pass {
		b.WriteString("**Verdict: PASS**\n\n")
	} else {
		fmt.Fprintf(b, "**Verdict: FAIL** (%s)\n\n", strings.Join(reasons, "; "))
	}

	b.WriteString("## Fault windows\n\n")
	b.WriteString("Each window runs from the fault's injection to the cluster's recovery " +
		"(a new write acknowledged and seen by every watcher); heal time is recovery " +
		"minus the moment the fault was undone. The last row checks the whole run.\n\n")
	columns := faultColumns()
	writeRow(b, columns)
	sep := make([]string, len(columns))
	for i := range sep {
		sep[i] = "---"
		if i >= 2 {
			sep[i] = "--:"
		}
	}
	writeRow(b, sep)
	for i, f := range r.Faults {
		writeRow(b, faultRow(i+1, f, r.Started))
	}
	whole := append([]string{"", "**Whole run**", formatOffset(r.Started, r.Started),
		formatDuration(r.Ended.Sub(r.Started)), "-"}, checksRow(r.Totals)...)
	writeRow(b, whole)
	b.WriteString("\n")

	if len(r.Skipped) > 0 {
		b.WriteString("## Faults not run\n\n")
		for _, sk := range r.Skipped {
			fmt.Fprintf(b, "- %s\n", oneLine(sk))
		}
		b.WriteString("\n")
	}

	b.WriteString("## Problems\n\n")
	if len(r.Problems) == 0 {
		b.WriteString("none\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(b, "- %s\n", oneLine(p))
	}
	b.WriteString("\n")

	b.WriteString("## Plots\n\n")
	b.WriteString("Shaded bands are the fault windows, numbered as in the table.\n\n")
	fmt.Fprintf(b, "- [Requests per second and error rate](%s)\n", ThroughputFile)
	fmt.Fprintf(b, "- [Watch lag per gateway](%s)\n\n", LagFile)
	fmt.Fprintf(b, "![Requests per second and error rate](%s)\n\n", ThroughputFile)
	fmt.Fprintf(b, "![Watch lag per gateway](%s)\n", LagFile)
}

// faultRow is the table row of fault n (from 1).
func faultRow(n int, f Fault, started time.Time) []string {
	duration, heal := "not healed", "-"
	if !f.Healed.IsZero() {
		duration = formatDuration(f.Healed.Sub(f.Injected))
		heal = "not recovered"
		if !f.Recovered.IsZero() {
			heal = formatDuration(f.Recovered.Sub(f.Healed))
		}
	}
	row := []string{fmt.Sprint(n), cell(f.Name), formatOffset(started, f.Injected), duration, heal}
	return append(row, checksRow(f.Checks)...)
}

// checksRow is the cells of c, in faultColumns' order.
func checksRow(c Checks) []string {
	return []string{
		fmt.Sprint(c.Requests),
		formatFailed(c.Failed, c.Requests),
		fmt.Sprint(c.Events),
		formatCounts(c.Lost, c.Duplicated, c.Reordered),
		fmt.Sprint(c.Writes),
		formatCounts(c.WritesLost, c.WritesTwice, c.FalseConflicts),
		fmt.Sprint(c.Reads),
		formatLinearizable(c.Linearizable),
		fmt.Sprint(c.StaleReads),
		fmt.Sprint(c.Relists),
	}
}

func writeRow(b *bytes.Buffer, cells []string) {
	b.WriteString("| ")
	b.WriteString(strings.Join(cells, " | "))
	b.WriteString(" |\n")
}

// formatTime writes t in UTC as RFC 3339, "-" when unset.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
