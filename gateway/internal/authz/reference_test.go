package authz

import (
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
)

// reference is the test oracle: kube-apiserver's RBAC written the plain
// way, with no index. A decision scans every binding; aggregated
// ClusterRoles are computed by running the clusterrole-aggregation
// controller's sync over all of them until nothing changes; rules are
// matched by a literal transcription of the upstream helpers (building
// "resource/subresource").
type reference struct {
	roles               map[string]*rbacv1.Role // namespace/name
	clusterRoles        map[string]*rbacv1.ClusterRole
	roleBindings        map[string]*rbacv1.RoleBinding // namespace/name
	clusterRoleBindings map[string]*rbacv1.ClusterRoleBinding

	agg map[string][]rbacv1.PolicyRule // computed lazily; nil when stale
}

func newReference() *reference {
	return &reference{
		roles:               map[string]*rbacv1.Role{},
		clusterRoles:        map[string]*rbacv1.ClusterRole{},
		roleBindings:        map[string]*rbacv1.RoleBinding{},
		clusterRoleBindings: map[string]*rbacv1.ClusterRoleBinding{},
	}
}

func (ref *reference) upsert(obj any) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		ref.roles[o.Namespace+"/"+o.Name] = o
	case *rbacv1.ClusterRole:
		ref.clusterRoles[o.Name] = o
		ref.agg = nil
	case *rbacv1.RoleBinding:
		ref.roleBindings[o.Namespace+"/"+o.Name] = o
	case *rbacv1.ClusterRoleBinding:
		ref.clusterRoleBindings[o.Name] = o
	default:
		panic(fmt.Sprintf("%T", obj))
	}
}

func (ref *reference) delete(obj any) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		delete(ref.roles, o.Namespace+"/"+o.Name)
	case *rbacv1.ClusterRole:
		delete(ref.clusterRoles, o.Name)
		ref.agg = nil
	case *rbacv1.RoleBinding:
		delete(ref.roleBindings, o.Namespace+"/"+o.Name)
	case *rbacv1.ClusterRoleBinding:
		delete(ref.clusterRoleBindings, o.Name)
	default:
		panic(fmt.Sprintf("%T", obj))
	}
}

// aggregated runs the controller's sync for every aggregated ClusterRole,
// in name order, until a full round changes nothing. Aggregated roles
// start with no rules, so this reaches the least fixed point.
func (ref *reference) aggregated() map[string][]rbacv1.PolicyRule {
	if ref.agg != nil {
		return ref.agg
	}
	var all []*rbacv1.ClusterRole
	for _, c := range ref.clusterRoles {
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	cur := map[string][]rbacv1.PolicyRule{}
	for _, c := range all {
		if c.AggregationRule == nil {
			cur[c.Name] = c.Rules
		}
	}
	for changed := true; changed; {
		changed = false
		for _, c := range all {
			if c.AggregationRule == nil {
				continue
			}
			var next []rbacv1.PolicyRule
			for i := range c.AggregationRule.ClusterRoleSelectors {
				sel, err := metav1.LabelSelectorAsSelector(&c.AggregationRule.ClusterRoleSelectors[i])
				if err != nil {
					continue
				}
				for _, m := range all {
					if m.Name == c.Name || !sel.Matches(labels.Set(m.Labels)) {
						continue
					}
					for _, r := range cur[m.Name] {
						if !refRuleExists(next, r) {
							next = append(next, r)
						}
					}
				}
			}
			// The sets only grow, so a size change is a change.
			if len(next) != len(cur[c.Name]) {
				changed = true
			}
			cur[c.Name] = next
		}
	}
	ref.agg = cur
	return cur
}

func refRuleExists(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	// %q prints nil and empty slices alike, as Semantic.DeepEqual compares them.
	key := func(p rbacv1.PolicyRule) string {
		return fmt.Sprintf("%q|%q|%q|%q|%q", p.Verbs, p.APIGroups, p.Resources, p.ResourceNames, p.NonResourceURLs)
	}
	for _, have := range rules {
		if key(have) == key(r) {
			return true
		}
	}
	return false
}

func (ref *reference) roleRefRules(namespace string, rr rbacv1.RoleRef) ([]rbacv1.PolicyRule, bool) {
	switch rr.Kind {
	case "Role":
		r, ok := ref.roles[namespace+"/"+rr.Name]
		if !ok || namespace == "" {
			return nil, false
		}
		return r.Rules, true
	case "ClusterRole":
		c, ok := ref.clusterRoles[rr.Name]
		if !ok {
			return nil, false
		}
		if c.AggregationRule != nil {
			return ref.aggregated()[c.Name], true
		}
		return c.Rules, true
	}
	return nil, false
}

func refAppliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if u.GetName() == s.Name {
				return i, true
			}
		case rbacv1.GroupKind:
			for _, g := range u.GetGroups() {
				if g == s.Name {
					return i, true
				}
			}
		case rbacv1.ServiceAccountKind:
			ns := namespace
			if s.Namespace != "" {
				ns = s.Namespace
			}
			if ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName()) {
				return i, true
			}
		}
	}
	return 0, false
}

// refRuleAllows is upstream's RuleAllows with the evaluation helpers.
func refRuleAllows(a Attributes, rule rbacv1.PolicyRule) bool {
	verb := false
	for _, v := range rule.Verbs {
		if v == "*" || v == a.Verb {
			verb = true
		}
	}
	if !verb {
		return false
	}
	if !a.IsResourceRequest {
		for _, u := range rule.NonResourceURLs {
			if u == "*" || u == a.Path {
				return true
			}
			if strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimRight(u, "*")) {
				return true
			}
		}
		return false
	}
	group := false
	for _, g := range rule.APIGroups {
		if g == "*" || g == a.APIGroup {
			group = true
		}
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined = a.Resource + "/" + a.Subresource
	}
	res := false
	for _, r := range rule.Resources {
		if r == "*" || r == combined {
			res = true
		}
		if a.Subresource != "" && len(r) == len(a.Subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, a.Subresource) {
			res = true
		}
	}
	name := len(rule.ResourceNames) == 0
	for _, n := range rule.ResourceNames {
		if n == a.Name {
			name = true
		}
	}
	return group && res && name
}

// refGrant is one binding that allows a request.
type refGrant struct {
	reason     string // what RBAC.Authorize says
	aggregated bool   // through an aggregated ClusterRole
	names      bool   // by a rule with resourceNames
	sa         bool   // to a ServiceAccount subject
	roleInNS   bool   // a RoleBinding to a ClusterRole
}

// grants returns every binding that allows a (empty: not allowed).
func (ref *reference) grants(a Attributes) []refGrant {
	var out []refGrant
	check := func(kind, bindingName, ns string, rr rbacv1.RoleRef, subjects []rbacv1.Subject) {
		i, ok := refAppliesTo(a.User, subjects, ns)
		if !ok {
			return
		}
		rules, ok := ref.roleRefRules(ns, rr)
		if !ok {
			return
		}
		for _, r := range rules {
			if !refRuleAllows(a, r) {
				continue
			}
			s := subjects[i]
			subj := fmt.Sprintf("%s %q", s.Kind, s.Name)
			if s.Kind == rbacv1.ServiceAccountKind {
				sns := s.Namespace
				if sns == "" {
					sns = ns
				}
				subj = fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+sns)
			}
			display := bindingName
			if ns != "" {
				display = bindingName + "/" + ns
			}
			c := ref.clusterRoles[rr.Name]
			out = append(out, refGrant{
				reason:     fmt.Sprintf("RBAC: allowed by %s %q of %s %q to %s", kind, display, rr.Kind, rr.Name, subj),
				aggregated: rr.Kind == "ClusterRole" && c != nil && c.AggregationRule != nil,
				names:      len(r.ResourceNames) > 0,
				sa:         s.Kind == rbacv1.ServiceAccountKind,
				roleInNS:   ns != "" && rr.Kind == "ClusterRole",
			})
			return
		}
	}
	for _, b := range ref.clusterRoleBindings {
		check("ClusterRoleBinding", b.Name, "", b.RoleRef, b.Subjects)
	}
	if a.Namespace != "" {
		for _, b := range ref.roleBindings {
			if b.Namespace == a.Namespace {
				check("RoleBinding", b.Name, b.Namespace, b.RoleRef, b.Subjects)
			}
		}
	}
	return out
}

// rulesFor is upstream's RulesFor, as sorted strings (the order of
// bindings is not specified).
func (ref *reference) rulesFor(u user.Info, namespace string) (rules []string, missing int) {
	add := func(ns string, rr rbacv1.RoleRef, subjects []rbacv1.Subject) {
		if _, ok := refAppliesTo(u, subjects, ns); !ok {
			return
		}
		rs, ok := ref.roleRefRules(ns, rr)
		if !ok {
			missing++
			return
		}
		for _, r := range rs {
			rules = append(rules, fmt.Sprintf("%#v", r))
		}
	}
	for _, b := range ref.clusterRoleBindings {
		add("", b.RoleRef, b.Subjects)
	}
	if namespace != "" {
		for _, b := range ref.roleBindings {
			if b.Namespace == namespace {
				add(namespace, b.RoleRef, b.Subjects)
			}
		}
	}
	sort.Strings(rules)
	return rules, missing
}
