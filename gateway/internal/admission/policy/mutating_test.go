package policy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/fieldmanager"
)

// TestMutating: mutations apply in order (ApplyConfiguration merging by
// the kind's structure, JSONPatch), matchConditions and variables are
// honoured, an evaluation error denies with upstream's 403 under Fail
// and is ignored under Ignore, and an IfNeeded policy runs again after a
// later one changed the object.
func TestMutating(t *testing.T) {
	rule := admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
	}}
	apply := func(expr string) admissionregistrationv1.Mutation {
		return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
			ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr}}
	}
	jsonPatch := func(expr string) admissionregistrationv1.Mutation {
		return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
			JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr}}
	}
	ignore := admissionregistrationv1.Ignore
	pol := func(name string, muts ...admissionregistrationv1.Mutation) *admissionregistrationv1.MutatingAdmissionPolicy {
		return &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule}},
				Variables:        []admissionregistrationv1.Variable{{Name: "tier", Expression: "'gold'"}},
				Mutations:        muts,
			}}
	}
	bind := func(policy string) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
		return &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b-" + policy},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policy}}
	}
	addLabel := apply(`Object{metadata: Object.metadata{labels: {"tier": variables.tier}}}`)
	tc, err := fieldmanager.NewTypeConverter(clientgoscheme.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, pols []*admissionregistrationv1.MutatingAdmissionPolicy) (*appsv1.Deployment, error) {
		t.Helper()
		var ps, bs list
		for _, p := range pols {
			ps, bs = append(ps, p), append(bs, bind(p.Name))
		}
		m, err := NewMutating(MutatingConfig{Policies: ps, Bindings: bs, Namespaces: namespaces{}, Scheme: clientgoscheme.Scheme,
			TypeConverter: func(schema.GroupVersionKind) managedfields.TypeConverter { return tc }})
		if err != nil {
			t.Fatal(err)
		}
		d := &appsv1.Deployment{}
		d.Name, d.Namespace = "d", "ns"
		d.Labels = map[string]string{"app": "web"}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:1"}}
		a := &admission.Attributes{Resource: deployments, Operation: admission.Create, Namespace: "ns", Name: "d", Object: d}
		err = m.Admit(context.Background(), a)
		return a.Object.(*appsv1.Deployment), err
	}

	t.Run("apply configuration then JSON patch", func(t *testing.T) {
		d, err := run(t, []*admissionregistrationv1.MutatingAdmissionPolicy{
			pol("p1", addLabel, jsonPatch(`[JSONPatch{op: "add", path: "/metadata/annotations", value: {"seen-tier": object.metadata.labels["tier"]}}]`)),
		})
		if err != nil {
			t.Fatal(err)
		}
		if d.Labels["tier"] != "gold" || d.Labels["app"] != "web" || d.Annotations["seen-tier"] != "gold" {
			t.Fatalf("labels %v, annotations %v", d.Labels, d.Annotations)
		}
	})
	t.Run("apply configuration merges lists by their keys", func(t *testing.T) {
		// Containers merge by name, as the kind's structure says: b gets
		// an env var, a stays.
		d, err := run(t, []*admissionregistrationv1.MutatingAdmissionPolicy{pol("env", apply(
			`Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: "b", env: [Object.spec.template.spec.containers.env{name: "TIER", value: variables.tier}]}]}}}}`))})
		if err != nil {
			t.Fatal(err)
		}
		cs := d.Spec.Template.Spec.Containers
		if len(cs) != 2 || cs[0].Name != "a" || cs[0].Image != "a:1" || len(cs[0].Env) != 0 || cs[1].Image != "b:1" || len(cs[1].Env) != 1 || cs[1].Env[0].Value != "gold" {
			t.Fatalf("containers %+v", cs)
		}
	})
	t.Run("match condition false", func(t *testing.T) {
		p := pol("p1", addLabel)
		p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "never", Expression: "object.metadata.name == 'other'"}}
		d, err := run(t, []*admissionregistrationv1.MutatingAdmissionPolicy{p})
		if err != nil || d.Labels["tier"] != "" {
			t.Fatalf("labels %v, %v: want no mutation", d.Labels, err)
		}
	})
	t.Run("evaluation error under Fail", func(t *testing.T) {
		_, err := run(t, []*admissionregistrationv1.MutatingAdmissionPolicy{pol("bad", apply(`Object{metadata: Object.metadata{labels: {"x": object.missing.field}}}`))})
		var status *apierrors.StatusError
		if !errors.As(err, &status) || status.ErrStatus.Code != http.StatusForbidden || status.ErrStatus.Reason != metav1.StatusReasonInvalid ||
			!strings.HasPrefix(status.ErrStatus.Message, "policy 'bad' with binding 'b-bad' denied request: ") || len(status.ErrStatus.Details.Causes) != 1 {
			t.Fatalf("err = %#v", err)
		}
	})
	t.Run("evaluation error under Ignore", func(t *testing.T) {
		bad := pol("bad", apply(`Object{metadata: Object.metadata{labels: {"x": object.missing.field}}}`))
		bad.Spec.FailurePolicy = &ignore
		d, err := run(t, []*admissionregistrationv1.MutatingAdmissionPolicy{bad, pol("good", addLabel)})
		if err != nil || d.Labels["tier"] != "gold" {
			t.Fatalf("labels %v, %v", d.Labels, err)
		}
	})
	t.Run("reinvocation", func(t *testing.T) {
		// first copies the "owner" label into an annotation; second sets
		// the label: first runs again and sees it.
		first := pol("first", apply(`Object{metadata: Object.metadata{annotations: {"owner": "owner" in object.metadata.labels ? object.metadata.labels["owner"] : "none"}}}`))
		first.Spec.ReinvocationPolicy = admissionregistrationv1.IfNeededReinvocationPolicy
		second := pol("second", apply(`Object{metadata: Object.metadata{labels: {"owner": "team-a"}}}`))
		d, err := run(t, []*admissionregistrationv1.MutatingAdmissionPolicy{first, second})
		if err != nil || d.Annotations["owner"] != "team-a" {
			t.Fatalf("annotations %v, %v: want the owner seen on reinvocation", d.Annotations, err)
		}
		first.Spec.ReinvocationPolicy = admissionregistrationv1.NeverReinvocationPolicy
		first.ResourceVersion = "first-never"
		d, err = run(t, []*admissionregistrationv1.MutatingAdmissionPolicy{first, second})
		if err != nil || d.Annotations["owner"] != "none" {
			t.Fatalf("annotations %v, %v: want no reinvocation", d.Annotations, err)
		}
	})
}
