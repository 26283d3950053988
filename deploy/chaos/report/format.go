package report

import (
	"fmt"
	"strings"
	"time"
)

// formatDuration writes d compactly with the precision a reader needs:
// milliseconds under a second, tenths of a second under a minute, whole
// seconds above ("850ms", "12.3s", "45s", "1m05s", "1h02m05s").
func formatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + formatDuration(-d)
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Round(time.Millisecond).Milliseconds())
	case d < time.Minute-50*time.Millisecond:
		d = d.Round(100 * time.Millisecond)
		if d%time.Second == 0 {
			return fmt.Sprintf("%ds", d/time.Second)
		}
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	h, m, s := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	}
	return fmt.Sprintf("%dm%02ds", m, s)
}

// formatOffset writes how long after the run started t was, to the
// second: "+0s", "+45s", "+1m05s".
func formatOffset(started, t time.Time) string {
	d := t.Sub(started).Round(time.Second)
	if d < 0 {
		return formatDuration(d)
	}
	return "+" + formatDuration(d)
}

// formatPercent writes n as a percentage of total with two decimals, or
// "n/a" when total is 0.
func formatPercent(n, total int) string {
	if total == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(total))
}

// formatFailed writes a failure count with its share of the requests:
// "12 (3.45%)".
func formatFailed(failed, requests int) string {
	return fmt.Sprintf("%d (%s)", failed, formatPercent(failed, requests))
}

// formatCounts joins counts with slashes: "0/1/0".
func formatCounts(ns ...int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, "/")
}

// formatLinearizable writes a linearizability verdict, "-" when the
// window was not checked.
func formatLinearizable(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

// cell makes s safe inside a Markdown table cell: one line, pipes
// escaped.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// oneLine folds s onto a single line for a Markdown list item.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
