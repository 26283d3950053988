package policy

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// costLimit bounds one expression's evaluation, as upstream's per-call
// limit.
const costLimit = 1000000

// compiled is a policy's expressions, ready to run.
type compiled struct {
	variables   []namedProgram
	conditions  []namedProgram // matchConditions
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

// env declares the variables every expression sees: object, oldObject,
// request, params (always null: param references are not supported),
// namespaceObject and variables.
func env() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType),
		cel.Variable("params", cel.DynType),
		cel.Variable("namespaceObject", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
	)
}

func program(e *cel.Env, expr string, want *types.Type) (cel.Program, error) {
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %w", iss.Err())
	}
	if want != nil && ast.OutputType() != cel.DynType && !ast.OutputType().IsExactType(want) {
		return nil, fmt.Errorf("must evaluate to %s", want)
	}
	return e.Program(ast, cel.CostLimit(costLimit))
}

// compile compiles p's expressions.
func compile(e *cel.Env, p *admissionregistrationv1.ValidatingAdmissionPolicy) *compiled {
	c := &compiled{}
	fail := func(what, expr string, err error) *compiled {
		c.err = fmt.Errorf("%s %q: %w", what, expr, err)
		return c
	}
	for _, v := range p.Spec.Variables {
		prg, err := program(e, v.Expression, nil)
		if err != nil {
			return fail("variable", v.Name, err)
		}
		c.variables = append(c.variables, namedProgram{name: v.Name, expr: v.Expression, prg: prg})
	}
	for _, m := range p.Spec.MatchConditions {
		prg, err := program(e, m.Expression, cel.BoolType)
		if err != nil {
			return fail("matchCondition", m.Name, err)
		}
		c.conditions = append(c.conditions, namedProgram{name: m.Name, expr: m.Expression, prg: prg})
	}
	for _, v := range p.Spec.Validations {
		prg, err := program(e, v.Expression, cel.BoolType)
		if err != nil {
			return fail("expression", v.Expression, err)
		}
		val := validation{v: v, prg: prg}
		if v.MessageExpression != "" {
			if val.message, err = program(e, v.MessageExpression, cel.StringType); err != nil {
				return fail("messageExpression", v.MessageExpression, err)
			}
		}
		c.validations = append(c.validations, val)
	}
	return c
}
