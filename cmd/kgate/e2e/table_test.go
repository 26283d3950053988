package e2e

import (
	"strings"
	"testing"
)

// table is kubectl's human-readable output: a header and rows of cells.
type table struct {
	header []string
	rows   []map[string]string
}

// parseTable reads kubectl's column-aligned output, in which a cell may be
// empty: each column starts where its header starts. Headers are apart by
// at least two spaces (kubectl pads with three); a header may hold one
// ("NOMINATED NODE").
func parseTable(t *testing.T, out string) table {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		t.Fatalf("no table header in %q", out)
	}
	head := lines[0]
	var starts []int
	for i := range len(head) {
		if head[i] != ' ' && (i == 0 || i >= 2 && head[i-1] == ' ' && head[i-2] == ' ') {
			starts = append(starts, i)
		}
	}
	tb := table{}
	for c, s := range starts {
		end := len(head)
		if c+1 < len(starts) {
			end = starts[c+1]
		}
		tb.header = append(tb.header, strings.TrimSpace(head[s:end]))
	}
	for _, l := range lines[1:] {
		row := make(map[string]string, len(starts))
		for c, s := range starts {
			end := len(l)
			if c+1 < len(starts) {
				end = min(end, starts[c+1])
			}
			if s < end {
				row[tb.header[c]] = strings.TrimSpace(l[s:end])
			} else {
				row[tb.header[c]] = ""
			}
		}
		tb.rows = append(tb.rows, row)
	}
	return tb
}

// checkHeader compares the header with want.
func (tb table) checkHeader(t *testing.T, want ...string) {
	t.Helper()
	if strings.Join(tb.header, " ") != strings.Join(want, " ") {
		t.Errorf("table header %q, want %q", tb.header, want)
	}
}

// row is the row whose column col is value; it fails the test if there is
// not exactly one.
func (tb table) row(t *testing.T, col, value string) map[string]string {
	t.Helper()
	var found []map[string]string
	for _, r := range tb.rows {
		if r[col] == value {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d rows with %s=%q, want 1; rows: %q", len(found), col, value, tb.rows)
	}
	return found[0]
}

// checkRow compares the cells of row with want (column → value).
func checkRow(t *testing.T, row map[string]string, want map[string]string) {
	t.Helper()
	for col, w := range want {
		if got := row[col]; got != w {
			t.Errorf("row %q: %s = %q, want %q", row, col, got, w)
		}
	}
}
