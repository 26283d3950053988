package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	celgo "github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	upstream "k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
)

// MutatingConfig configures the MutatingAdmissionPolicy plugin.
type MutatingConfig struct {
	Policies   lister // MutatingAdmissionPolicies
	Bindings   lister // MutatingAdmissionPolicyBindings
	Namespaces Namespaces
	// Scheme has the served types with their conversions and defaults
	// (builtin.Semantics.Scheme): a mutated object is converted back and
	// defaulted with it, as upstream's dispatcher does.
	Scheme *runtime.Scheme
	// TypeConverter gives the structure of a served kind for
	// ApplyConfiguration mutations; nil for a kind (a custom resource)
	// merges by the object's own shape.
	TypeConverter func(schema.GroupVersionKind) managedfields.TypeConverter
	// Authorizer answers the expressions' authorizer checks; nil has no
	// opinion on any.
	Authorizer authorizer.UnconditionalAuthorizer
	// Params reads param objects; nil knows no paramKind.
	Params Params
}

// Mutating is kube-apiserver's MutatingAdmissionPolicy plugin. Its
// policies and bindings select writes as ValidatingAdmissionPolicy's do
// (matchConstraints, the binding's matchResources and paramRef); each
// selected policy's matchConditions, variables and mutations —
// ApplyConfiguration and JSONPatch expressions — are compiled, evaluated
// and applied by upstream's own CEL compiler and patchers, in order, the
// result converted back to the served type and defaulted. Errors follow
// the policy's failurePolicy and are reported as upstream reports them
// (403, "policy '<p>' with binding '<b>' denied request: ..."). A policy
// with reinvocationPolicy IfNeeded runs again once after a later one
// changed the object.
type Mutating struct {
	cfg MutatingConfig
	oi  upstream.ObjectInterfaces

	mu       sync.Mutex                    // guards compiled
	compiled map[string]*mutatingEvaluator // by policy uid/resourceVersion
}

// mutatingEvaluator is one policy compiled.
type mutatingEvaluator struct {
	compiler *plugincel.CompositedCompiler // nil when the CEL environment failed
	matcher  matchconditions.Matcher       // nil without matchConditions
	patchers []patch.Patcher
	err      error
}

// NewMutating returns the plugin.
func NewMutating(cfg MutatingConfig) (*Mutating, error) {
	if cfg.Policies == nil || cfg.Bindings == nil || cfg.Namespaces == nil || cfg.Scheme == nil {
		return nil, errors.New("cannot make mutating policy admission: Policies, Bindings, Namespaces and Scheme are required")
	}
	return &Mutating{cfg: cfg, oi: upstream.NewObjectInterfacesFromScheme(cfg.Scheme), compiled: map[string]*mutatingEvaluator{}}, nil
}

// variable is a policy variable as upstream's compiler takes it.
type variable admissionregistrationv1.Variable

func (v *variable) GetName() string            { return v.Name }
func (v *variable) GetExpression() string      { return v.Expression }
func (v *variable) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.AnyType} }
func (m *Mutating) compiledFor(pol *admissionregistrationv1.MutatingAdmissionPolicy) *mutatingEvaluator {
	key := string(pol.UID) + "/" + pol.ResourceVersion + "/" + pol.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.compiled[key]; ok {
		return e
	}
	if len(m.compiled) > 1024 {
		m.compiled = map[string]*mutatingEvaluator{}
	}
	e := compileMutating(pol)
	m.compiled[key] = e
	return e
}

// compileMutating compiles pol with upstream's compiler, in the
// environment and with the declarations upstream's plugin uses.
func compileMutating(pol *admissionregistrationv1.MutatingAdmissionPolicy) *mutatingEvaluator {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return &mutatingEvaluator{err: fmt.Errorf("failed to initialize CEL compiler: %w", err)}
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: pol.Spec.ParamKind != nil, HasAuthorizer: true}
	vars := make([]plugincel.NamedExpressionAccessor, len(pol.Spec.Variables))
	for i := range pol.Spec.Variables {
		vars[i] = (*variable)(&pol.Spec.Variables[i])
	}
	compiler.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	e := &mutatingEvaluator{compiler: compiler}
	if conds := pol.Spec.MatchConditions; len(conds) > 0 {
		acc := make([]plugincel.ExpressionAccessor, len(conds))
		for i := range conds {
			acc[i] = (*matchconditions.MatchCondition)(&conds[i])
		}
		e.matcher = matchconditions.NewMatcher(compiler.CompileCondition(acc, opts, environment.StoredExpressions), pol.Spec.FailurePolicy, "policy", "validate", pol.Name)
	}
	popts := opts
	popts.HasPatchTypes = true
	for _, mu := range pol.Spec.Mutations {
		switch {
		case mu.PatchType == admissionregistrationv1.PatchTypeJSONPatch && mu.JSONPatch != nil:
			e.patchers = append(e.patchers, patch.NewJSONPatcher(compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: mu.JSONPatch.Expression}, popts, environment.StoredExpressions)))
		case mu.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && mu.ApplyConfiguration != nil:
			e.patchers = append(e.patchers, patch.NewApplyConfigurationPatcher(compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: mu.ApplyConfiguration.Expression}, popts, environment.StoredExpressions)))
		default:
			e.err = fmt.Errorf("unsupported mutation type %q", mu.PatchType)
		}
	}
	return e
}

// policyError is one policy's failure, kept for the verdict.
type policyError struct {
	policy, binding string
	fail            bool
	err             error
}

func (e policyError) Error() string {
	return fmt.Sprintf("policy '%s' with binding '%s' denied request: %s", e.policy, e.binding, e.err.Error())
}

// Admit applies the mutations of every binding's policy that selects a,
// in the bindings' order.
func (m *Mutating) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Object == nil {
		return nil // a delete: nothing to mutate
	}
	bindings := m.cfg.Bindings.List("")
	if len(bindings) == 0 {
		return nil
	}
	policies := map[string]*admissionregistrationv1.MutatingAdmissionPolicy{}
	for _, o := range m.cfg.Policies.List("") {
		if pol, ok := o.(*admissionregistrationv1.MutatingAdmissionPolicy); ok {
			policies[pol.Name] = pol
		}
	}
	var errs []policyError
	type invocation struct {
		pol   *admissionregistrationv1.MutatingAdmissionPolicy
		b     *admissionregistrationv1.MutatingAdmissionPolicyBinding
		param runtime.Object
	}
	var invocations []invocation
	for _, o := range bindings {
		b, ok := o.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
		if !ok {
			continue
		}
		pol := policies[b.Spec.PolicyName]
		if pol == nil {
			continue
		}
		fail := failClosed(pol)
		ok, err := matchResources(ctx, m.cfg.Namespaces, pol.Spec.MatchConstraints, a, false)
		if err == nil && ok && b.Spec.MatchResources != nil {
			ok, err = matchResources(ctx, m.cfg.Namespaces, b.Spec.MatchResources, a, true)
		}
		if err != nil {
			errs = append(errs, policyError{pol.Name, b.Name, fail, err})
			continue
		}
		if !ok {
			continue
		}
		params, err := collectParams(ctx, m.cfg.Params, pol.Spec.ParamKind, b.Spec.ParamRef, a)
		if err != nil {
			errs = append(errs, policyError{pol.Name, b.Name, fail, fmt.Errorf("failed to configure binding: %w", err)})
			continue
		}
		for _, p := range params {
			invocations = append(invocations, invocation{pol, b, p})
		}
	}
	if len(invocations) == 0 {
		return verdict(a, errs)
	}
	// The objects as upstream's dispatcher has them: copies with their
	// kind set (the patchers convert through unstructured).
	obj, old := withKind(a.Object, a.GVK()), withKind(a.OldObject, a.GVK())
	rec := upstream.NewAttributesRecord(obj, old, a.GVK(), a.Namespace, a.Name, a.GVR(), a.Subresource,
		upstream.Operation(a.Operation), a.Options, a.DryRun, a.User)
	va := &upstream.VersionedAttributes{Attributes: rec, VersionedObject: upstream.NewLazyObject(obj), VersionedOldObject: upstream.NewLazyObject(old), VersionedKind: a.GVK()}
	var (
		ns         *corev1.Namespace
		nsRead     bool
		authz      = authorizerOf(m.cfg.Authorizer)
		lastChange = -1 // the last invocation that changed the object
	)
	run := func(i int) error {
		inv := invocations[i]
		fail := failClosed(inv.pol)
		e := m.compiledFor(inv.pol)
		if e.err != nil {
			errs = append(errs, policyError{inv.pol.Name, inv.b.Name, fail, e.err})
			return nil
		}
		if !nsRead {
			nsRead = true
			if a.Namespace != "" && a.GVR() != corev1.SchemeGroupVersion.WithResource("namespaces") {
				o, err := m.cfg.Namespaces.NamespaceObject(ctx, a.Namespace)
				if err != nil {
					return apierror.NotFound(corev1.Resource("namespaces"), a.Namespace)
				}
				ns, _ = o.(*corev1.Namespace)
			}
		}
		cctx := e.compiler.CreateContext(ctx)
		if e.matcher != nil {
			r := e.matcher.Match(cctx, va, inv.param, authz)
			if r.Error != nil {
				errs = append(errs, policyError{inv.pol.Name, inv.b.Name, fail, r.Error})
				return nil
			}
			if !r.Matches {
				return nil
			}
		}
		// A patcher returns a new object and never changes the one it
		// was given: before stays as it is.
		before := va.VersionedObject.Object()
		for _, p := range e.patchers {
			if err := m.patch(cctx, p, va, ns, inv.param, authz); err != nil {
				var status *apierrors.StatusError
				if errors.As(err, &status) {
					return status
				}
				errs = append(errs, policyError{inv.pol.Name, inv.b.Name, fail, err})
			}
		}
		if !equality.Semantic.DeepEqual(before, va.VersionedObject.Object()) {
			lastChange = i
		}
		return nil
	}
	for i := range invocations {
		if err := run(i); err != nil {
			return err
		}
	}
	// An IfNeeded policy runs once more when a later one changed the
	// object after it ran, as upstream's reinvocation does (the last
	// change of the first pass decides; the reruns change it).
	last := lastChange
	for i, inv := range invocations[:max(last, 0)] {
		if inv.pol.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			if err := run(i); err != nil {
				return err
			}
		}
	}
	a.Object = va.VersionedObject.Object()
	return verdict(a, errs)
}

// failClosed reports whether pol's failures deny the request
// (failurePolicy Fail, the default).
func failClosed(pol *admissionregistrationv1.MutatingAdmissionPolicy) bool {
	return pol.Spec.FailurePolicy == nil || *pol.Spec.FailurePolicy != admissionregistrationv1.Ignore
}

// patch applies one mutation to va's object: upstream's patcher, then the
// result converted back to the served type and defaulted.
func (m *Mutating) patch(ctx context.Context, p patch.Patcher, va *upstream.VersionedAttributes, ns *corev1.Namespace, param runtime.Object, authz authorizer.Authorizer) error {
	var tc managedfields.TypeConverter
	if m.cfg.TypeConverter != nil {
		tc = m.cfg.TypeConverter(va.VersionedKind)
	}
	if tc == nil {
		tc = managedfields.NewDeducedTypeConverter()
	}
	out, err := p.Patch(ctx, patch.Request{
		MatchedResource:     va.GetResource(),
		VersionedAttributes: va,
		ObjectInterfaces:    m.oi,
		OptionalVariables:   plugincel.OptionalVariableBindings{VersionedParams: param, Authorizer: authz},
		Namespace:           ns,
		TypeConverter:       tc,
	}, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return err
	}
	if _, ok := va.VersionedObject.Object().(*unstructured.Unstructured); !ok {
		if out, err = m.oi.GetObjectConvertor().ConvertToVersion(out, va.VersionedKind.GroupVersion()); err != nil {
			return err
		}
	}
	m.oi.GetObjectDefaulter().Default(out)
	va.UpdateObject(out)
	return nil
}

// verdict is upstream's answer to the policies' failures: the failures
// of Fail policies deny the request with 403, the first one's message and
// reason (Invalid: a configuration or evaluation error), every one of
// them a cause; those of Ignore policies are dropped.
func verdict(a *admission.Attributes, errs []policyError) error {
	var msgs []string
	for _, e := range errs {
		if e.fail {
			msgs = append(msgs, e.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return apierror.MutatingPoliciesDenied(a.GVR().GroupResource(), a.Name, metav1.StatusReasonInvalid, msgs)
}

// withKind is a copy of obj (nil: nil) with its kind set to gvk.
func withKind(obj runtime.Object, gvk schema.GroupVersionKind) runtime.Object {
	if obj == nil {
		return nil
	}
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// authorizerOf adapts the gateway's authorizer to upstream's interface
// (the expressions ask unconditional questions only).
func authorizerOf(a authorizer.UnconditionalAuthorizer) authorizer.Authorizer {
	if a == nil {
		return nil
	}
	return authorizer.AuthorizerFunc(a.Authorize)
}
