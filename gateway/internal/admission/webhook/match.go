package webhook

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/expr"
	"github.com/kgate/kgate/gateway/internal/apierror"
)

// hook is what matching and calling need of a mutating or validating
// webhook.
type hook struct {
	config             string // the configuration's name
	name               string
	clientConfig       admissionregistrationv1.WebhookClientConfig
	rules              []admissionregistrationv1.RuleWithOperations
	failurePolicy      admissionregistrationv1.FailurePolicyType
	namespaceSelector  *metav1.LabelSelector
	objectSelector     *metav1.LabelSelector
	sideEffects        admissionregistrationv1.SideEffectClass
	timeoutSeconds     int32
	reinvocationPolicy admissionregistrationv1.ReinvocationPolicyType
	conditions         []expr.Condition // matchConditions, compiled
}

// selects says whether h's rules, selectors and matchConditions select
// a; vars holds the conditions' variables, shared by the hooks matched
// against the same a.
func (p *Plugin) selects(ctx context.Context, h *hook, a *admission.Attributes, vars *activation) (bool, error) {
	matched := false
	for _, r := range h.rules {
		if admission.MatchesRule(r, a) {
			matched = true
			break
		}
	}
	if !matched {
		return false, nil
	}
	if ok, err := admission.ObjectSelected(h.objectSelector, a); err != nil || !ok {
		return false, err
	}
	if ok, err := admission.NamespaceSelected(ctx, p.cfg.Namespaces, h.namespaceSelector, a); err != nil || !ok {
		return false, err
	}
	return p.conditionsHold(h, a, vars)
}

// activation is the CEL variables of a request's matchConditions, built
// for the first hook that has conditions and reused by the others: every
// hook is matched against the same object, and building them encodes
// object and oldObject.
type activation struct {
	vars map[string]any
	err  error
	done bool
}

func (v *activation) of(p *Plugin, a *admission.Attributes) (map[string]any, error) {
	if !v.done {
		v.vars, v.err = expr.Activation(p.cfg.Scheme, a, p.cfg.Authorizer)
		v.done = true
	}
	return v.vars, v.err
}

// conditionsHold evaluates h's matchConditions, once the rules and
// selectors matched: all must hold. An evaluation error follows h's
// failure policy: Ignore skips the webhook, Fail rejects the request
// with 403, as upstream.
func (p *Plugin) conditionsHold(h *hook, a *admission.Attributes, v *activation) (bool, error) {
	if len(h.conditions) == 0 {
		return true, nil
	}
	vars, err := v.of(p, a)
	if err == nil {
		var ok bool
		if ok, err = expr.Match(h.conditions, vars); err == nil {
			return ok, nil
		}
	}
	if h.failurePolicy == admissionregistrationv1.Ignore {
		p.cfg.Logger.Warn("failed evaluating match conditions, failing open", "webhook", h.name, "err", err)
		return false, nil
	}
	return false, &conditionError{err: apierror.Forbidden(a.GVR().GroupResource(), a.Name, err)}
}

// conditionError is a matchCondition failure under failurePolicy Fail:
// the request is rejected with it as is.
type conditionError struct{ err *apierrors.StatusError }

func (e *conditionError) Error() string { return e.err.Error() }
func (e *conditionError) Unwrap() error { return e.err }

// conditionsKey names the matchConditions of one webhook of one version
// of a configuration.
type conditionsKey struct {
	uid                   types.UID
	resourceVersion, name string // the configuration's
	webhook               string
}

// compiledConditions compiles the matchConditions of the webhook name
// of configuration c, once per version of c.
func (p *Plugin) compiledConditions(c metav1.Object, name string, mcs []admissionregistrationv1.MatchCondition) []expr.Condition {
	if len(mcs) == 0 {
		return nil
	}
	key := conditionsKey{c.GetUID(), c.GetResourceVersion(), c.GetName(), name}
	p.mu.Lock()
	defer p.mu.Unlock()
	if conds, ok := p.compiled[key]; ok {
		return conds
	}
	if len(p.compiled) > 1024 {
		p.compiled = map[conditionsKey][]expr.Condition{}
	}
	conds := expr.CompileConditions(p.env, mcs)
	for _, cond := range conds {
		if err := cond.Err(); err != nil {
			p.cfg.Logger.Warn("invalid matchCondition", "configuration", c.GetName(), "webhook", name, "condition", cond.Name, "err", err)
		}
	}
	p.compiled[key] = conds
	return conds
}
