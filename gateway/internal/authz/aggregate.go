package authz

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// clusterRole is a ClusterRole with the rules it grants: its own, or for
// one with an aggregationRule those of the ClusterRoles it selects.
type clusterRole struct {
	obj *rbacv1.ClusterRole
	// selectors are the aggregationRule's clusterRoleSelectors; an
	// invalid one is nil and selects nothing.
	selectors []labels.Selector
	rules     []rbacv1.PolicyRule
}

func newClusterRole(obj *rbacv1.ClusterRole) *clusterRole {
	c := &clusterRole{obj: obj, rules: obj.Rules}
	if obj.AggregationRule != nil {
		c.rules = nil
		c.selectors = make([]labels.Selector, len(obj.AggregationRule.ClusterRoleSelectors))
		for i := range obj.AggregationRule.ClusterRoleSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&obj.AggregationRule.ClusterRoleSelectors[i])
			if err == nil {
				c.selectors[i] = sel
			}
		}
	}
	return c
}

func (c *clusterRole) aggregated() bool { return c.obj.AggregationRule != nil }

// selects reports whether one of c's selectors matches other.
func (c *clusterRole) selects(other *clusterRole) bool {
	if other.obj.Name == c.obj.Name {
		return false
	}
	set := labels.Set(other.obj.Labels)
	for _, sel := range c.selectors {
		if sel != nil && sel.Matches(set) {
			return true
		}
	}
	return false
}

// affectsAggregation reports whether adding or removing c can change the
// rules of an aggregated ClusterRole. r.mu must be held.
func (r *RBAC) affectsAggregation(c *clusterRole) bool {
	if c == nil {
		return false
	}
	if c.aggregated() {
		return true
	}
	for _, agg := range r.aggregators {
		if agg.selects(c) {
			return true
		}
	}
	return false
}

// aggregate recomputes the rules of every aggregated ClusterRole as the
// clusterrole-aggregation controller would write them once settled: for
// each selector in order, the ClusterRoles it matches sorted by name
// (the role itself excepted), their rules appended unless already present.
// A member that is itself aggregated contributes its aggregated rules, so
// the result is the least fixed point of the controller; a cycle of
// aggregated roles adds nothing of its own. r.mu must be held for writing.
func (r *RBAC) aggregate() {
	if len(r.aggregators) == 0 {
		return
	}
	names := make([]string, 0, len(r.clusterRoles))
	for n := range r.clusterRoles {
		names = append(names, n)
	}
	sort.Strings(names)
	members := make(map[string][]*clusterRole, len(r.aggregators))
	for aggName, agg := range r.aggregators {
		for _, sel := range agg.selectors {
			if sel == nil {
				continue
			}
			for _, n := range names {
				c := r.clusterRoles[n]
				if n != aggName && sel.Matches(labels.Set(c.obj.Labels)) {
					members[aggName] = append(members[aggName], c)
				}
			}
		}
	}
	for aggName, agg := range r.aggregators {
		var rules []rbacv1.PolicyRule
		visited := map[string]bool{aggName: true}
		var walk func(name string)
		walk = func(name string) {
			for _, m := range members[name] {
				if m.aggregated() {
					if !visited[m.obj.Name] {
						visited[m.obj.Name] = true
						walk(m.obj.Name)
					}
					continue
				}
				for i := range m.obj.Rules {
					rules = appendRule(rules, &m.obj.Rules[i])
				}
			}
		}
		walk(aggName)
		agg.rules = rules
	}
}

// appendRule appends rule to rules unless an equal rule is there.
func appendRule(rules []rbacv1.PolicyRule, rule *rbacv1.PolicyRule) []rbacv1.PolicyRule {
	for i := range rules {
		if rulesEqual(&rules[i], rule) {
			return rules
		}
	}
	return append(rules, *rule)
}

// Aggregation is an aggregated ClusterRole whose stored rules differ from
// the rules its aggregationRule selects.
type Aggregation struct {
	Name string
	// ResourceVersion is the stored object's, as this RBAC last saw it.
	ResourceVersion string
	// Rules are the aggregated rules, to be stored; shared, do not modify.
	Rules []rbacv1.PolicyRule
}

// PendingAggregations lists the aggregated ClusterRoles whose stored
// rules are not the aggregated ones, by name: what kube-controller-
// manager's clusterrole-aggregation controller would write.
func (r *RBAC) PendingAggregations() []Aggregation {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Aggregation
	for name, agg := range r.aggregators {
		if !sameRules(agg.rules, agg.obj.Rules) {
			out = append(out, Aggregation{Name: name, ResourceVersion: agg.obj.ResourceVersion, Rules: agg.rules})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sameRules(a, b []rbacv1.PolicyRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !rulesEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}
