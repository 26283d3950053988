package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/storage/registry"
)

type list []runtime.Object

func (l list) List(string) []runtime.Object { return l }

type namespaces struct{}

func (namespaces) NamespaceLabels(context.Context, string) (map[string]string, error) {
	return map[string]string{"env": "prod"}, nil
}
func (namespaces) NamespaceObject(context.Context, string) (runtime.Object, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"env": "prod"}}}, nil
}

var deployments = &registry.Resource{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true}

func TestPolicy(t *testing.T) {
	rule := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
	}}
	pol := func(exprs ...admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: exprs[0].Expression},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule}},
				Variables:        []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}},
				Validations:      exprs,
			}}
	}
	binding := func(actions ...admissionregistrationv1.ValidationAction) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ValidationActions: actions}}
	}
	three := int32(3)
	attrs := func() *admission.Attributes {
		d := &appsv1.Deployment{}
		d.Name, d.Namespace, d.Spec.Replicas = "d", "ns", &three
		return &admission.Attributes{Resource: deployments, Operation: admission.Create, Namespace: "ns", Name: "d", Object: d,
			User: nil}
	}
	f := func(p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, wantErr, wantWarn string) {
		t.Helper()
		pl, err := New(Config{Policies: list{p}, Bindings: list{b}, Namespaces: namespaces{}, Scheme: clientgoscheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		a := attrs()
		err = pl.Validate(context.Background(), a)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("err = %v, want none", err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("err = %v, want %q", err, wantErr)
		}
		w := strings.Join(a.Warnings(), "|")
		if w != wantWarn {
			t.Errorf("warnings = %q, want %q", w, wantWarn)
		}
	}
	deny := admissionregistrationv1.Deny
	warn := admissionregistrationv1.Warn
	f(pol(admissionregistrationv1.Validation{Expression: "variables.replicas <= 5"}), binding(deny), "", "")
	f(pol(admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 2", Message: "at most 2"}), binding(deny),
		"ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 2", "")
	f(pol(admissionregistrationv1.Validation{Expression: "variables.replicas <= 2", MessageExpression: "'got ' + string(variables.replicas)"}), binding(warn),
		"", "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': got 3")
	f(pol(admissionregistrationv1.Validation{Expression: "namespaceObject.metadata.labels.env == 'dev'"}), binding(deny),
		"denied request: failed expression: namespaceObject.metadata.labels.env == 'dev'", "")
	f(pol(admissionregistrationv1.Validation{Expression: "request.operation == 'UPDATE'"}), binding(deny), "failed expression", "")
	// A compile error fails closed by default, open with Ignore.
	bad := pol(admissionregistrationv1.Validation{Expression: "object.spec.("})
	f(bad, binding(deny), "compilation failed", "")
	ignore := admissionregistrationv1.Ignore
	bad.Spec.FailurePolicy = &ignore
	f(bad, binding(deny), "", "")
	// The reason picks the code.
	forbidden := metav1.StatusReasonForbidden
	pl, _ := New(Config{Policies: list{pol(admissionregistrationv1.Validation{Expression: "false", Reason: &forbidden})}, Bindings: list{binding(deny)}, Namespaces: namespaces{}, Scheme: clientgoscheme.Scheme})
	if err := pl.Validate(context.Background(), attrs()); !apierrors.IsForbidden(err) {
		t.Errorf("reason Forbidden: err = %v", err)
	}
}

// configMaps is Params over a fixed set of ConfigMaps (namespaced).
type configMaps []*corev1.ConfigMap

func (configMaps) ParamScope(gvk schema.GroupVersionKind) (bool, error) {
	if gvk != corev1.SchemeGroupVersion.WithKind("ConfigMap") {
		return false, errors.New("not served")
	}
	return true, nil
}

func (c configMaps) GetParam(_ context.Context, _ schema.GroupVersionKind, ns, name string) (runtime.Object, error) {
	for _, cm := range c {
		if cm.Namespace == ns && cm.Name == name {
			return cm, nil
		}
	}
	return nil, nil
}

func (c configMaps) ListParams(_ context.Context, _ schema.GroupVersionKind, ns string, sel labels.Selector) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, cm := range c {
		if cm.Namespace == ns && sel.Matches(labels.Set(cm.Labels)) {
			out = append(out, cm)
		}
	}
	return out, nil
}

func TestPolicyParams(t *testing.T) {
	cm := func(ns, name, max string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"limits": "yes"}},
			Data: map[string]string{"maxReplicas": max}}
	}
	params := configMaps{cm("ns", "limits", "5"), cm("other", "limits", "1"), cm("ns", "strict", "2")}
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.replicas <= int(params.data.maxReplicas)",
				MessageExpression: "'at most ' + params.data.maxReplicas + ' replicas (' + params.metadata.name + ')'",
			}},
		}}
	deny, allow := admissionregistrationv1.DenyAction, admissionregistrationv1.AllowAction
	f := func(ref *admissionregistrationv1.ParamRef, replicas int32, clusterScoped bool, wantErr string) {
		t.Helper()
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p", ParamRef: ref,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
		pl, err := New(Config{Policies: list{pol}, Bindings: list{b}, Namespaces: namespaces{}, Scheme: clientgoscheme.Scheme, Params: params})
		if err != nil {
			t.Fatal(err)
		}
		d := &appsv1.Deployment{}
		d.Name, d.Namespace, d.Spec.Replicas = "d", "ns", &replicas
		a := &admission.Attributes{Resource: deployments, Operation: admission.Create, Namespace: "ns", Name: "d", Object: d}
		if clusterScoped {
			a.Namespace = ""
		}
		err = pl.Validate(context.Background(), a)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%+v, %d replicas: err = %v, want none", ref, replicas, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%+v, %d replicas: err = %v, want %q", ref, replicas, err, wantErr)
		}
	}
	// By name, in the request's namespace by default.
	f(&admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny}, 5, false, "")
	f(&admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny}, 6, false,
		"ValidatingAdmissionPolicy 'p' with binding 'b' denied request: at most 5 replicas (limits)")
	f(&admissionregistrationv1.ParamRef{Name: "limits", Namespace: "other", ParameterNotFoundAction: &deny}, 2, false, "at most 1 replicas")
	// By selector: evaluated once per param, the strictest denies.
	f(&admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"limits": "yes"}}, ParameterNotFoundAction: &deny}, 2, false, "")
	f(&admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"limits": "yes"}}, ParameterNotFoundAction: &deny}, 3, false, "at most 2 replicas (strict)")
	// Not found: Deny (also the default) rejects, Allow admits.
	notFound := "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
	f(&admissionregistrationv1.ParamRef{Name: "missing", ParameterNotFoundAction: &deny}, 1, false, notFound)
	f(&admissionregistrationv1.ParamRef{Name: "missing"}, 1, false, notFound)
	f(&admissionregistrationv1.ParamRef{Name: "missing", ParameterNotFoundAction: &allow}, 100, false, "")
	f(&admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}, ParameterNotFoundAction: &allow}, 100, false, "")
	// Without paramRef, params is null.
	f(nil, 1, false, "no such key")
	// A namespaced param kind needs a namespace.
	f(&admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny}, 1, true, "cannot use namespaced paramRef")
	// An unknown kind fails the binding.
	pol.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "Nope"}
	f(&admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny}, 1, false, "failed to configure binding: paramKind kind `/v1, Kind=Nope` not known")
}
