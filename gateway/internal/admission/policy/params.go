package policy

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/expr"
)

// Params reads the objects policies take as params (paramKind), live:
// any served kind, so not from the admission feed.
type Params interface {
	// ParamScope says whether objects of gvk are namespaced; it fails
	// when gvk is not served.
	ParamScope(gvk schema.GroupVersionKind) (namespaced bool, err error)
	// GetParam returns the object of gvk named name in ns (ns is empty
	// for cluster-scoped kinds), or nil when there is none.
	GetParam(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (runtime.Object, error)
	// ListParams returns the objects of gvk in ns that sel selects.
	ListParams(ctx context.Context, gvk schema.GroupVersionKind, ns string, sel labels.Selector) ([]runtime.Object, error)
}

// errNoParams is upstream's message for parameterNotFoundAction Deny.
var errNoParams = errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")

// params returns the values of CEL's params for binding b of pol on a,
// as upstream's CollectParams: one nil value without paramKind or
// paramRef; otherwise the object paramRef names, or every object its
// selector selects, each evaluated on its own. A namespaced paramKind
// is read in paramRef.namespace, or the request's namespace. Finding
// none admits (Allow) or fails the binding (Deny, the default), and a
// failed binding follows the policy's failurePolicy.
func (p *Plugin) params(ctx context.Context, pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, a *admission.Attributes) ([]any, error) {
	objs, err := collectParams(ctx, p.cfg.Params, pol.Spec.ParamKind, b.Spec.ParamRef, a)
	if err != nil || objs == nil {
		return nil, err
	}
	out := make([]any, len(objs))
	for i, o := range objs {
		if o == nil {
			continue
		}
		if out[i], err = expr.ToValue(p.cfg.Scheme, o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// collectParams returns the param objects of a binding (paramRef) of a
// policy (paramKind) on a: one nil object without paramKind or paramRef,
// none (nil) when none is found and the binding allows that.
func collectParams(ctx context.Context, params Params, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, a *admission.Attributes) ([]runtime.Object, error) {
	if kind == nil || ref == nil {
		return []runtime.Object{nil}, nil
	}
	gv, err := schema.ParseGroupVersion(kind.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("paramKind apiVersion %q: %w", kind.APIVersion, err)
	}
	gvk := gv.WithKind(kind.Kind)
	if params == nil {
		return nil, fmt.Errorf("paramKind kind `%s` not known", gvk)
	}
	namespaced, err := params.ParamScope(gvk)
	if err != nil {
		return nil, fmt.Errorf("paramKind kind `%s` not known", gvk)
	}
	ns := ""
	switch {
	case namespaced && ref.Namespace != "":
		ns = ref.Namespace
	case namespaced && a.Namespace != "":
		ns = a.Namespace
	case namespaced:
		return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
	case ref.Namespace != "":
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	var objs []runtime.Object
	switch {
	case ref.Name != "" && ref.Selector != nil:
		return nil, errors.New("paramRef.name and paramRef.selector are mutually exclusive")
	case ref.Name != "":
		o, err := params.GetParam(ctx, gvk, ns, ref.Name)
		if err != nil {
			return nil, err
		}
		if o != nil {
			objs = append(objs, o)
		}
	case ref.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		if objs, err = params.ListParams(ctx, gvk, ns, sel); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("one of name or selector must be provided")
	}
	if len(objs) == 0 {
		if ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.AllowAction {
			return nil, nil
		}
		return nil, errNoParams
	}
	return objs, nil
}
