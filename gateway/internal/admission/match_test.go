package admission

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kgate/kgate/storage/registry"
)

func TestMatchesRule(t *testing.T) {
	pods := &registry.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}
	nodes := &registry.Resource{Version: "v1", Resource: "nodes", Kind: "Node"}
	ns := admissionregistrationv1.NamespacedScope
	cl := admissionregistrationv1.ClusterScope
	f := func(resources []string, scope *admissionregistrationv1.ScopeType, res *registry.Resource, sub string, op Operation, want bool) {
		t.Helper()
		r := admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: resources, Scope: scope},
		}
		if got := MatchesRule(r, &Attributes{Resource: res, Subresource: sub, Operation: op}); got != want {
			t.Errorf("%v scope %v on %s/%s %s = %v, want %v", resources, scope, res.Resource, sub, op, got, want)
		}
	}
	f([]string{"pods"}, nil, pods, "", Create, true)
	f([]string{"pods"}, nil, pods, "status", Update, false)
	f([]string{"pods/status"}, nil, pods, "status", Update, true)
	f([]string{"pods/*"}, nil, pods, "", Create, true)
	f([]string{"pods/*"}, nil, pods, "status", Create, true)
	f([]string{"*/status"}, nil, pods, "status", Update, true)
	f([]string{"*"}, nil, nodes, "", Create, true)
	f([]string{"*"}, &ns, nodes, "", Create, false)
	f([]string{"*"}, &cl, nodes, "", Create, true)
	f([]string{"pods"}, nil, pods, "", Delete, false)
	// A subresource is matched only by a rule naming it: "pods" is not
	// called for pods/binding (nor "deployments" for deployments/scale).
	f([]string{"pods"}, nil, pods, "binding", Create, false)
	f([]string{"pods/binding"}, nil, pods, "binding", Create, true)
	f([]string{"pods/status"}, nil, pods, "binding", Create, false)
}
