// Package policy is kube-apiserver's ValidatingAdmissionPolicy plugin:
// ValidatingAdmissionPolicies and their bindings, kept in memory by the
// admission feed, select writes by matchConstraints (and the binding's
// matchResources), and each selected policy's CEL validations run with
// object, oldObject, request, namespaceObject, variables, authorizer and
// params: the objects a binding's paramRef selects (params.go), the
// policy evaluated once for each.
package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/expr"
	"github.com/kgate/kgate/gateway/internal/apierror"
)

// lister lists every object of a kind (feed.Store).
type lister interface {
	List(ns string) []runtime.Object
}

// Namespaces reads namespaces (live) for namespaceSelector and
// namespaceObject.
type Namespaces interface {
	admission.NamespaceLabels
	NamespaceObject(ctx context.Context, name string) (runtime.Object, error)
}

// Config configures the plugin.
type Config struct {
	Policies   lister // ValidatingAdmissionPolicies
	Bindings   lister // ValidatingAdmissionPolicyBindings
	Namespaces Namespaces
	Scheme     *runtime.Scheme
	// Authorizer answers the expressions' authorizer checks; nil has no
	// opinion on any.
	Authorizer authorizer.UnconditionalAuthorizer
	// Params reads param objects; nil knows no paramKind.
	Params Params
}

// Plugin is ValidatingAdmissionPolicy.
type Plugin struct {
	cfg Config
	env *cel.Env

	mu       sync.Mutex           // guards compiled
	compiled map[string]*compiled // by policy uid/resourceVersion
}

// New returns the plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.Policies == nil || cfg.Bindings == nil || cfg.Namespaces == nil || cfg.Scheme == nil {
		return nil, errors.New("cannot make policy admission: every dependency is required")
	}
	e, err := expr.Env(expr.Policy)
	if err != nil {
		return nil, fmt.Errorf("cannot make policy admission: %w", err)
	}
	return &Plugin{cfg: cfg, env: e, compiled: map[string]*compiled{}}, nil
}

func (p *Plugin) compiledFor(pol *admissionregistrationv1.ValidatingAdmissionPolicy) *compiled {
	key := string(pol.UID) + "/" + pol.ResourceVersion + "/" + pol.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.compiled[key]; ok {
		return c
	}
	if len(p.compiled) > 1024 {
		p.compiled = map[string]*compiled{}
	}
	c := compile(p.env, pol)
	p.compiled[key] = c
	return c
}

// Validate evaluates every binding's policy that selects a.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	bindings := p.cfg.Bindings.List("")
	if len(bindings) == 0 {
		return nil
	}
	policies := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
	for _, o := range p.cfg.Policies.List("") {
		if pol, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			policies[pol.Name] = pol
		}
	}
	var vars map[string]any // built once, when a policy selects a
	for _, o := range bindings {
		b, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		if !ok {
			continue
		}
		pol := policies[b.Spec.PolicyName]
		if pol == nil {
			continue
		}
		ok, err := p.matches(ctx, pol.Spec.MatchConstraints, a, false)
		if err == nil && ok && b.Spec.MatchResources != nil {
			ok, err = p.matches(ctx, b.Spec.MatchResources, a, true)
		}
		if err != nil {
			if failOpen(pol) {
				continue
			}
			return apierror.PolicyDenied(pol.Name, b.Name, metav1.StatusReasonInvalid, err.Error())
		}
		if !ok {
			continue
		}
		if vars == nil {
			if vars, err = p.activation(ctx, a); err != nil {
				return apierror.InternalError(err)
			}
		}
		params, err := p.params(ctx, pol, b, a)
		if err != nil {
			if failOpen(pol) {
				continue
			}
			return apierror.PolicyDenied(pol.Name, b.Name, metav1.StatusReasonInvalid, "failed to configure binding: "+err.Error())
		}
		for _, param := range params {
			if err := p.evaluate(pol, b, a, vars, param); err != nil {
				return err
			}
		}
	}
	return nil
}

func failOpen(pol *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
	return pol.Spec.FailurePolicy != nil && *pol.Spec.FailurePolicy == admissionregistrationv1.Ignore
}

// evaluate runs pol's validations for binding b.
func (p *Plugin) evaluate(pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, a *admission.Attributes, base map[string]any, params any) error {
	failure := func(msg string) error {
		if failOpen(pol) {
			return nil
		}
		return apierror.PolicyDenied(pol.Name, b.Name, metav1.StatusReasonInvalid, msg)
	}
	c := p.compiledFor(pol)
	if c.err != nil {
		return failure(c.err.Error())
	}
	vars := make(map[string]any, len(base)+2)
	for k, v := range base {
		vars[k] = v
	}
	vars[expr.Params] = params
	computed := map[string]any{}
	vars["variables"] = computed
	for _, v := range c.variables {
		out, _, err := v.prg.Eval(vars)
		if err != nil {
			return failure(fmt.Sprintf("variable %q resulted in error: %v", v.name, err))
		}
		computed[v.name] = out
	}
	if ok, err := expr.Match(c.conditions, vars); err != nil {
		return failure(err.Error())
	} else if !ok {
		return nil
	}
	actions := b.Spec.ValidationActions
	for _, v := range c.validations {
		out, _, err := v.prg.Eval(vars)
		if err != nil {
			if err := failure(fmt.Sprintf("expression '%s' resulted in error: %v", v.v.Expression, err)); err != nil {
				return err
			}
			continue
		}
		if ok, _ := out.Value().(bool); ok {
			continue
		}
		msg := message(v, vars)
		reason := metav1.StatusReasonInvalid
		if v.v.Reason != nil {
			reason = *v.v.Reason
		}
		for _, act := range actions {
			switch act {
			case admissionregistrationv1.Warn:
				a.AddWarning(fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", pol.Name, b.Name, msg))
			}
		}
		for _, act := range actions {
			if act == admissionregistrationv1.Deny {
				return apierror.PolicyDenied(pol.Name, b.Name, reason, msg)
			}
		}
	}
	return nil
}

// message is a failed validation's message: messageExpression, message,
// or upstream's default.
func message(v validation, vars map[string]any) string {
	if v.message != nil {
		if out, _, err := v.message.Eval(vars); err == nil {
			if s, ok := out.Value().(string); ok && strings.TrimSpace(s) != "" && !strings.Contains(s, "\n") {
				return s
			}
		}
	}
	if v.v.Message != "" {
		return v.v.Message
	}
	return "failed expression: " + v.v.Expression
}

// matches applies matchConstraints, or a binding's matchResources, which
// without resourceRules narrows by selectors only.
func (p *Plugin) matches(ctx context.Context, mr *admissionregistrationv1.MatchResources, a *admission.Attributes, binding bool) (bool, error) {
	return matchResources(ctx, p.cfg.Namespaces, mr, a, binding)
}

func matchResources(ctx context.Context, namespaces Namespaces, mr *admissionregistrationv1.MatchResources, a *admission.Attributes, binding bool) (bool, error) {
	if mr == nil {
		return false, nil
	}
	in := binding && len(mr.ResourceRules) == 0
	for _, r := range mr.ResourceRules {
		if ruleSelects(r, a) {
			in = true
			break
		}
	}
	if !in {
		return false, nil
	}
	for _, r := range mr.ExcludeResourceRules {
		if ruleSelects(r, a) {
			return false, nil
		}
	}
	if ok, err := admission.ObjectSelected(mr.ObjectSelector, a); err != nil || !ok {
		return false, err
	}
	return admission.NamespaceSelected(ctx, namespaces, mr.NamespaceSelector, a)
}

func ruleSelects(r admissionregistrationv1.NamedRuleWithOperations, a *admission.Attributes) bool {
	if !admission.MatchesRule(r.RuleWithOperations, a) {
		return false
	}
	if len(r.ResourceNames) == 0 {
		return true
	}
	for _, n := range r.ResourceNames {
		if n == a.Name {
			return true
		}
	}
	return false
}

// activation builds the variables of a's expressions.
func (p *Plugin) activation(ctx context.Context, a *admission.Attributes) (map[string]any, error) {
	vars, err := expr.Activation(p.cfg.Scheme, a, p.cfg.Authorizer)
	if err != nil {
		return nil, err
	}
	var nsObj any
	if a.Resource.Namespaced && a.Namespace != "" {
		if o, err := p.cfg.Namespaces.NamespaceObject(ctx, a.Namespace); err == nil {
			nsObj, _ = expr.ToValue(p.cfg.Scheme, o)
		}
	}
	vars[expr.NamespaceObject], vars[expr.Params] = nsObj, nil
	return vars, nil
}
