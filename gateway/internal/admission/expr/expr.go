// Package expr is the CEL environment admission expressions share:
// webhook matchConditions and ValidatingAdmissionPolicy (matchConditions,
// variables, validations, messageExpression). It declares the variables
// upstream declares for each, compiles with a cost limit, and builds the
// values expressions read: object and oldObject as JSON trees, request
// as admission.k8s.io/v1 AdmissionRequest, authorizer through
// k8s.io/apiserver's CEL authz library.
package expr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/kgate/kgate/gateway/internal/admission"
)

// CostLimit bounds one expression's evaluation, as upstream's per-call
// limit.
const CostLimit = 1000000

// Kind says which expressions an environment compiles.
type Kind int

const (
	// Webhook is a webhook's matchConditions: object, oldObject, request,
	// authorizer.
	Webhook Kind = iota
	// Policy is a ValidatingAdmissionPolicy's expressions: those of
	// Webhook and params, namespaceObject, variables.
	Policy
)

// Variable names.
const (
	Object          = "object"
	OldObject       = "oldObject"
	Request         = "request"
	Params          = "params"
	NamespaceObject = "namespaceObject"
	Variables       = "variables"
	Authz           = "authorizer"
	// RequestResource is the authorizer check of the request's own
	// resource.
	RequestResource = "authorizer.requestResource"
)

// Env returns the CEL environment of k's expressions.
func Env(k Kind) (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.Variable(Object, cel.DynType),
		cel.Variable(OldObject, cel.DynType),
		cel.Variable(Request, cel.DynType),
		cel.Variable(Authz, library.AuthorizerType),
		cel.Variable(RequestResource, library.ResourceCheckType),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
		library.Authz(),
		library.AuthzSelectors(),
	}
	if k == Policy {
		opts = append(opts,
			cel.Variable(Params, cel.DynType),
			cel.Variable(NamespaceObject, cel.DynType),
			cel.Variable(Variables, cel.MapType(cel.StringType, cel.DynType)),
		)
	}
	e, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot make the CEL environment: %w", err)
	}
	return e, nil
}

// Compile compiles expr; want, when not nil, is the type it must have.
func Compile(e *cel.Env, expr string, want *types.Type) (cel.Program, error) {
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %w", iss.Err())
	}
	if want != nil && ast.OutputType() != cel.DynType && !ast.OutputType().IsExactType(want) {
		return nil, fmt.Errorf("must evaluate to %s", want)
	}
	return e.Program(ast, cel.CostLimit(CostLimit))
}

// Bool evaluates a boolean program: a non-boolean result is an error.
func Bool(prg cel.Program, vars map[string]any) (bool, error) {
	out, _, err := prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("expected a boolean, got %s", out.Type())
	}
	return b, nil
}

// Activation returns the variables every expression reads of a: object,
// oldObject, request, and the authorizer (nil denies nothing and allows
// nothing: its checks have no opinion).
func Activation(scheme *runtime.Scheme, a *admission.Attributes, authz authorizer.UnconditionalAuthorizer) (map[string]any, error) {
	obj, err := ToValue(scheme, a.Object)
	if err != nil {
		return nil, err
	}
	old, err := ToValue(scheme, a.OldObject)
	if err != nil {
		return nil, err
	}
	vars := map[string]any{Object: obj, OldObject: old, Request: RequestOf(a)}
	vars[Authz], vars[RequestResource] = Authorizer(a, authz)
	return vars, nil
}

// RequestOf is a's AdmissionRequest as CEL reads it.
func RequestOf(a *admission.Attributes) map[string]any {
	gvr, gvk := a.GVR(), a.GVK()
	req := map[string]any{
		"kind":        map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind},
		"resource":    map[string]any{"group": gvr.Group, "version": gvr.Version, "resource": gvr.Resource},
		"subResource": a.Subresource,
		"name":        a.Name,
		"namespace":   a.Namespace,
		"operation":   string(a.Operation),
		"dryRun":      a.DryRun,
		"userInfo":    map[string]any{},
	}
	req["requestKind"], req["requestResource"], req["requestSubResource"] = req["kind"], req["resource"], a.Subresource
	if u := a.User; u != nil {
		groups := make([]any, len(u.GetGroups()))
		for i, g := range u.GetGroups() {
			groups[i] = g
		}
		ui := map[string]any{"username": u.GetName(), "uid": u.GetUID(), "groups": groups}
		if ex := u.GetExtra(); len(ex) > 0 {
			m := make(map[string]any, len(ex))
			for k, v := range ex {
				l := make([]any, len(v))
				for i, s := range v {
					l[i] = s
				}
				m[k] = l
			}
			ui["extra"] = m
		}
		req["userInfo"] = ui
	}
	return req
}

// Authorizer returns the authorizer and authorizer.requestResource
// values for a's user.
func Authorizer(a *admission.Attributes, authz authorizer.UnconditionalAuthorizer) (ref.Val, ref.Val) {
	if authz == nil {
		authz = noOpinion{}
	}
	var u user.Info = &user.DefaultInfo{}
	if a.User != nil {
		u = a.User
	}
	return library.NewAuthorizerVal(u, authz), library.NewResourceAuthorizerVal(u, authz, resourceOf{a})
}

type noOpinion struct{}

func (noOpinion) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "no authorizer", nil
}

// resourceOf is library.Resource of a.
type resourceOf struct{ a *admission.Attributes }

func (r resourceOf) GetName() string                          { return r.a.Name }
func (r resourceOf) GetNamespace() string                     { return r.a.Namespace }
func (r resourceOf) GetResource() schema.GroupVersionResource { return r.a.GVR() }
func (r resourceOf) GetSubresource() string                   { return r.a.Subresource }

// ToValue turns obj into the JSON tree CEL reads, integers as int64; nil
// stays nil. Typed objects get their apiVersion and kind from scheme.
func ToValue(scheme *runtime.Scheme, obj runtime.Object) (any, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, nil
	}
	obj = obj.DeepCopyObject()
	if gvks, _, err := scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return FromJSON(data)
}

// FromJSON decodes a JSON document into the tree CEL reads.
func FromJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return numbers(out), nil
}

func numbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = numbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = numbers(e)
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}
