package report

import "fmt"

// violations counts c's check violations: lost, duplicated and
// reordered events, lost, doubly applied and falsely conflicting writes,
// stale rv=0 reads and relists. Failed requests are not violations: a
// fault may make requests fail, not make kgate lie.
func (c Checks) violations() int {
	return c.Lost + c.Duplicated + c.Reordered +
		c.WritesLost + c.WritesTwice + c.FalseConflicts +
		c.StaleReads + c.Relists
}

// linearizableOK reports whether c's linearizability verdict lets the
// run pass: "ok", or "" when it was not checked.
func (c Checks) linearizableOK() bool {
	return c.Linearizable == "ok" || c.Linearizable == ""
}

// verdict decides whether r passed: no problems, no violations in any
// fault window or the whole run, and no linearizability verdict other
// than "ok". When it failed, reasons says why, one short phrase each.
func verdict(r *Run) (pass bool, reasons []string) {
	if n := len(r.Problems); n > 0 {
		reasons = append(reasons, plural(n, "problem"))
	}
	windows := 0
	for _, f := range r.Faults {
		if f.Checks.violations() > 0 || !f.Checks.linearizableOK() {
			windows++
		}
	}
	if windows > 0 {
		reasons = append(reasons, fmt.Sprintf("violations in %s", plural(windows, "fault window")))
	}
	if n := r.Totals.violations(); n > 0 {
		reasons = append(reasons, fmt.Sprintf("%s in the whole run", plural(n, "violation")))
	}
	if !r.Totals.linearizableOK() {
		reasons = append(reasons, fmt.Sprintf("linearizability %s", r.Totals.Linearizable))
	}
	return len(reasons) == 0, reasons
}

// plural writes "1 problem", "2 problems".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
