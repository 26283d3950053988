package expr

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Condition is a compiled matchCondition; one that does not compile
// keeps its error, which evaluating it returns.
type Condition struct {
	Name       string
	Expression string
	prg        cel.Program
	err        error
}

// Err is the compile error of c, or nil.
func (c Condition) Err() error { return c.err }

// CompileConditions compiles matchConditions in e. It never fails: a
// condition that does not compile fails when evaluated, so the failure
// policy of what declares it decides, as upstream.
func CompileConditions(e *cel.Env, mcs []admissionregistrationv1.MatchCondition) []Condition {
	out := make([]Condition, len(mcs))
	for i, m := range mcs {
		out[i] = Condition{Name: m.Name, Expression: m.Expression}
		out[i].prg, out[i].err = Compile(e, m.Expression, cel.BoolType)
	}
	return out
}

// Match evaluates conditions as upstream does: one that is false
// excludes (even when others failed); otherwise any error is returned
// for the failure policy to decide; otherwise they all hold.
func Match(conds []Condition, vars map[string]any) (bool, error) {
	var errs []error
	for _, c := range conds {
		if c.err != nil {
			errs = append(errs, fmt.Errorf("matchCondition %q: %w", c.Name, c.err))
			continue
		}
		ok, err := Bool(c.prg, vars)
		if err != nil {
			errs = append(errs, fmt.Errorf("matchCondition %q: expression '%s' resulted in error: %w", c.Name, c.Expression, err))
			continue
		}
		if !ok {
			return false, nil
		}
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	return true, nil
}
