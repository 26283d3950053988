// Package webhook is kube-apiserver's MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook: the webhook configurations the admission
// feed keeps in memory select writes by rules and selectors, and each
// selected webhook gets an admission.k8s.io/v1 AdmissionReview over
// HTTPS. Mutating webhooks run one after another and may answer a JSON
// patch (re-run once, if they ask, when a later one changed the object);
// validating webhooks run in parallel and may only deny.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/expr"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/latency"
)

// lister lists every configuration of a kind (feed.Store).
type lister interface {
	List(ns string) []runtime.Object
	Generation() uint64
}

// Services resolves a Service reference to its cluster IP.
type Services interface {
	ClusterIP(ctx context.Context, namespace, name string) (string, error)
}

// Config configures the webhook plugins.
type Config struct {
	Mutating   lister // MutatingWebhookConfigurations
	Validating lister // ValidatingWebhookConfigurations
	Namespaces admission.NamespaceLabels
	// Services resolves service references; nil supports url only.
	Services Services
	Scheme   *runtime.Scheme
	Logger   *slog.Logger
	// DefaultTimeout when a webhook sets none. Default 10s.
	DefaultTimeout time.Duration
	// Authorizer answers matchConditions' authorizer checks; nil has no
	// opinion on any.
	Authorizer authorizer.UnconditionalAuthorizer
}

// Plugin calls admission webhooks. Mutating() and Validating() are its
// two places in the chain.
type Plugin struct {
	cfg     Config
	clients clients
	env     *cel.Env // of matchConditions

	mu       sync.Mutex // guards compiled
	compiled map[conditionsKey][]expr.Condition
}

// New returns the webhook plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.Mutating == nil || cfg.Validating == nil || cfg.Namespaces == nil || cfg.Scheme == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make webhook admission: every dependency is required")
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 10 * time.Second
	}
	e, err := expr.Env(expr.Webhook)
	if err != nil {
		return nil, fmt.Errorf("cannot make webhook admission: %w", err)
	}
	return &Plugin{cfg: cfg, clients: clients{byKey: map[string]*clientEntry{}}, env: e, compiled: map[conditionsKey][]expr.Condition{}}, nil
}

// Mutating is MutatingAdmissionWebhook.
func (p *Plugin) Mutating() admission.Mutator { return mutating{p} }

// Validating is ValidatingAdmissionWebhook.
func (p *Plugin) Validating() admission.Validator { return validating{p} }

type mutating struct{ p *Plugin }
type validating struct{ p *Plugin }

func (p *Plugin) mutatingHooks() []*hook {
	var out []*hook
	for _, o := range p.cfg.Mutating.List("") {
		c, ok := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
		if !ok {
			continue
		}
		for _, w := range c.Webhooks {
			h := &hook{config: c.Name, name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules,
				namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				conditions: p.compiledConditions(c, w.Name, w.MatchConditions)}
			fill(h, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds)
			if w.ReinvocationPolicy != nil {
				h.reinvocationPolicy = *w.ReinvocationPolicy
			}
			out = append(out, h)
		}
	}
	return out
}

func (p *Plugin) validatingHooks() []*hook {
	var out []*hook
	for _, o := range p.cfg.Validating.List("") {
		c, ok := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		if !ok {
			continue
		}
		for _, w := range c.Webhooks {
			h := &hook{config: c.Name, name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules,
				namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				conditions: p.compiledConditions(c, w.Name, w.MatchConditions)}
			fill(h, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds)
			out = append(out, h)
		}
	}
	return out
}

func fill(h *hook, fp *admissionregistrationv1.FailurePolicyType, se *admissionregistrationv1.SideEffectClass, timeout *int32) {
	h.failurePolicy = admissionregistrationv1.Fail
	if fp != nil {
		h.failurePolicy = *fp
	}
	h.sideEffects = admissionregistrationv1.SideEffectClassUnknown
	if se != nil {
		h.sideEffects = *se
	}
	if timeout != nil {
		h.timeoutSeconds = *timeout
	}
}

// dryRunOK: a webhook with side effects cannot see a dry run.
func dryRunOK(h *hook) bool {
	return h.sideEffects == admissionregistrationv1.SideEffectClassNone || h.sideEffects == admissionregistrationv1.SideEffectClassNoneOnDryRun
}

func dryRunUnsupported(name string) error {
	return apierror.BadRequest("admission webhook \"" + name + "\" does not support dry run")
}

// Admit runs the mutating webhooks in order, then once more those that
// asked to be reinvoked when a later webhook changed the object.
func (m mutating) Admit(ctx context.Context, a *admission.Attributes) error {
	// Webhook time is not the server's: kube-apiserver's SLI latency
	// leaves it out.
	defer latency.From(ctx).Since(time.Now())
	p := m.p
	hooks := p.mutatingHooks()
	var selected []*hook
	var vars activation
	for _, h := range hooks {
		ok, err := p.selects(ctx, h, a, &vars)
		if err != nil {
			var ce *conditionError
			if errors.As(err, &ce) {
				return ce.err
			}
			if h.failurePolicy == admissionregistrationv1.Ignore {
				continue
			}
			return apierror.InternalError(err)
		}
		if ok {
			selected = append(selected, h)
		}
	}
	lastChange := -1
	ran := make([]bool, len(selected))
	for i, h := range selected {
		changed, err := p.mutate(ctx, h, a)
		if err != nil {
			return err
		}
		ran[i] = true
		if changed {
			lastChange = i
		}
	}
	for i, h := range selected {
		if i >= lastChange {
			break
		}
		if ran[i] && h.reinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			if _, err := p.mutate(ctx, h, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// mutate calls one mutating webhook and applies its patch.
func (p *Plugin) mutate(ctx context.Context, h *hook, a *admission.Attributes) (bool, error) {
	if a.DryRun && !dryRunOK(h) {
		return false, dryRunUnsupported(h.name)
	}
	resp, err := p.call(ctx, h, a)
	if err != nil {
		return false, p.callFailed(h, err)
	}
	for _, w := range resp.Warnings {
		a.AddWarning(w)
	}
	if !resp.Allowed {
		return false, apierror.WebhookDenied(h.name, resp.Result)
	}
	if len(resp.Patch) == 0 || a.Object == nil {
		return false, nil
	}
	next, err := p.applyPatch(a.Object, resp.PatchType, resp.Patch)
	if err != nil {
		return false, p.callFailed(h, err)
	}
	changed := !equality.Semantic.DeepEqual(next, a.Object)
	a.Object = next
	return changed, nil
}

// Validate calls the selected validating webhooks in parallel; the first
// denial (in configuration order) rejects.
func (v validating) Validate(ctx context.Context, a *admission.Attributes) error {
	defer latency.From(ctx).Since(time.Now())
	p := v.p
	var selected []*hook
	var vars activation
	for _, h := range p.validatingHooks() {
		ok, err := p.selects(ctx, h, a, &vars)
		if err != nil {
			var ce *conditionError
			if errors.As(err, &ce) {
				return ce.err
			}
			if h.failurePolicy == admissionregistrationv1.Ignore {
				continue
			}
			return apierror.InternalError(err)
		}
		if ok {
			if a.DryRun && !dryRunOK(h) {
				return dryRunUnsupported(h.name)
			}
			selected = append(selected, h)
		}
	}
	errs := make([]error, len(selected))
	var wg sync.WaitGroup
	for i, h := range selected {
		wg.Go(func() {
			resp, err := p.call(ctx, h, a)
			if err != nil {
				errs[i] = p.callFailed(h, err)
				return
			}
			for _, w := range resp.Warnings {
				a.AddWarning(w)
			}
			if !resp.Allowed {
				errs[i] = apierror.WebhookDenied(h.name, resp.Result)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// callFailed applies h's failure policy to a failed call.
func (p *Plugin) callFailed(h *hook, err error) error {
	if h.failurePolicy == admissionregistrationv1.Ignore {
		p.cfg.Logger.Warn("failed calling webhook, failing open", "webhook", h.name, "err", err)
		return nil
	}
	return apierror.InternalError(errors.New("failed calling webhook \"" + h.name + "\": " + err.Error()))
}
