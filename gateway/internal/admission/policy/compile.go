package policy

import (
	"fmt"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kgate/kgate/gateway/internal/admission/expr"
)

// compiled is a policy's expressions, ready to run.
type compiled struct {
	variables   []namedProgram
	conditions  []expr.Condition
	validations []validation
	err         error // compile error: the failure policy decides
}

type namedProgram struct {
	name string
	expr string
	prg  cel.Program
}

type validation struct {
	v       admissionregistrationv1.Validation
	prg     cel.Program
	message cel.Program // messageExpression, may be nil
}

// compile compiles p's expressions.
func compile(e *cel.Env, p *admissionregistrationv1.ValidatingAdmissionPolicy) *compiled {
	c := &compiled{}
	fail := func(what, name string, err error) *compiled {
		c.err = fmt.Errorf("%s %q: %w", what, name, err)
		return c
	}
	for _, v := range p.Spec.Variables {
		prg, err := expr.Compile(e, v.Expression, nil)
		if err != nil {
			return fail("variable", v.Name, err)
		}
		c.variables = append(c.variables, namedProgram{name: v.Name, expr: v.Expression, prg: prg})
	}
	c.conditions = expr.CompileConditions(e, p.Spec.MatchConditions)
	for _, m := range c.conditions {
		if err := m.Err(); err != nil {
			return fail("matchCondition", m.Name, err)
		}
	}
	for _, v := range p.Spec.Validations {
		prg, err := expr.Compile(e, v.Expression, cel.BoolType)
		if err != nil {
			return fail("expression", v.Expression, err)
		}
		val := validation{v: v, prg: prg}
		if v.MessageExpression != "" {
			if val.message, err = expr.Compile(e, v.MessageExpression, cel.StringType); err != nil {
				return fail("messageExpression", v.MessageExpression, err)
			}
		}
		c.validations = append(c.validations, val)
	}
	return c
}
