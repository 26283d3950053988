package authz

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
)

// bytes turns fuzz input into choices among small alphabets, so that
// random rules and requests meet often. Past the end it yields zeros.
type bytes struct {
	b []byte
	i int
}

func (s *bytes) next() int {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return int(s.b[s.i-1])
}

func (s *bytes) done() bool { return s.i >= len(s.b) }

func (s *bytes) pick(xs []string) string { return xs[s.next()%len(xs)] }

// picks returns 0 to 3 elements; nil for none, or an empty slice.
func (s *bytes) picks(xs []string) []string {
	n := s.next() % 5
	if n == 4 {
		return []string{}
	}
	var out []string
	for range n {
		out = append(out, s.pick(xs))
	}
	return out
}

var (
	fzVerbs      = list("get", "list", "*", "create", "GET")
	fzGroups     = list("", "apps", "*")
	fzResources  = list("pods", "pods/log", "*/log", "*", "deployments", "deployments/scale", "*/scale", "pods/*", "log", "", "pods/xlog", "*/xlog", "podsx/log")
	fzSubs       = list("", "", "log", "scale", "*")
	fzNames      = list("a", "b", "")
	fzURLs       = list("/a", "/a/*", "/a*", "*", "/b", "/a/b", "/a**", "")
	fzPaths      = list("/a", "/a/", "/a/b", "/b", "/ab", "", "/")
	fzNamespaces = list("n1", "n2", "")
	fzRoles      = list("r1", "r2", "r3")
	fzKinds      = list("User", "Group", "ServiceAccount", "Other")
	fzSubjects   = list("u1", "u2", "g1", "sa1", "system:serviceaccount:n1:sa1")
	fzLabels     = list("x", "y")
)

func fzUsers() []user.Info {
	return []user.Info{
		usr("u1"), usr("u2", "g1"), usr("sa1", "u1"),
		usr("system:serviceaccount:n1:sa1", "system:serviceaccounts", "system:serviceaccounts:n1", "g1"),
		usr("system:serviceaccount:n2:sa1", "system:serviceaccounts", "system:serviceaccounts:n2"),
		usr("system:serviceaccount:n1:u1"),
		usr("g1"),
	}
}

func (s *bytes) rules() []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for range s.next() % 3 {
		r := rbacv1.PolicyRule{Verbs: s.picks(fzVerbs)}
		if s.next()%3 == 0 {
			r.NonResourceURLs = s.picks(fzURLs)
		} else {
			r.APIGroups, r.Resources = s.picks(fzGroups), s.picks(fzResources)
			if s.next()%2 == 0 {
				r.ResourceNames = s.picks(fzNames)
			}
		}
		out = append(out, r)
	}
	return out
}

func (s *bytes) subjects() []rbacv1.Subject {
	var out []rbacv1.Subject
	for range s.next() % 3 {
		out = append(out, rbacv1.Subject{Kind: s.pick(fzKinds), Name: s.pick(fzSubjects), Namespace: s.pick(fzNamespaces)})
	}
	return out
}

func (s *bytes) labels() map[string]string {
	switch s.next() % 3 {
	case 0:
		return nil
	case 1:
		return map[string]string{"k": s.pick(fzLabels)}
	}
	return map[string]string{"k": s.pick(fzLabels), "j": s.pick(fzLabels)}
}

func (s *bytes) roleRef() rbacv1.RoleRef {
	kinds := list("Role", "ClusterRole", "ClusterRole", "Bogus")
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: s.pick(kinds), Name: s.pick(fzRoles)}
}

func (s *bytes) attrs(users []user.Info) Attributes {
	a := Attributes{User: users[s.next()%len(users)], Verb: s.pick(list("get", "list", "create", "*"))}
	if s.next()%4 == 0 {
		a.Path = s.pick(fzPaths)
		return a
	}
	a.IsResourceRequest = true
	a.APIGroup = s.pick(list("", "apps", "*"))
	a.Resource = s.pick(list("pods", "deployments", "log", "*", "pod"))
	a.Subresource = s.pick(fzSubs)
	a.Namespace = s.pick(fzNamespaces)
	a.Name = s.pick(fzNames)
	return a
}

// aimAt returns requests that the rules of ref's roles grant, or nearly:
// for each rule, its first verb, group and name with each of its
// resources or URLs, wildcards replaced.
func aimAt(ref *reference) []Attributes {
	var rules []rbacv1.PolicyRule
	for _, r := range ref.roles {
		rules = append(rules, r.Rules...)
	}
	for _, c := range ref.clusterRoles {
		rules = append(rules, c.Rules...)
	}
	first := func(xs []string, star, none string) string {
		if len(xs) == 0 {
			return none
		}
		if xs[0] == "*" {
			return star
		}
		return xs[0]
	}
	var out []Attributes
	for _, r := range rules {
		verb := first(r.Verbs, "get", "get")
		for _, u := range r.NonResourceURLs {
			out = append(out, Attributes{Verb: verb, Path: strings.TrimRight(u, "*") + "x"})
		}
		for _, res := range r.Resources {
			a := Attributes{IsResourceRequest: true, Verb: verb, APIGroup: first(r.APIGroups, "apps", ""), Name: first(r.ResourceNames, "a", "a")}
			a.Resource, a.Subresource, _ = strings.Cut(res, "/")
			if a.Resource == "*" || a.Resource == "" {
				a.Resource = "pods"
			}
			out = append(out, a)
		}
	}
	return out
}

// FuzzAuthorize applies a random sequence of upserts and deletes of
// random roles and bindings to RBAC and to the reference evaluator, and
// compares their decisions, their RulesFor and the aggregated rules.
func FuzzAuthorize(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("\x01\x00\x02\x03\x01\x01\x00\x01\x02\x00\x02\x00\x00\x01\x01\x01\x01\x02\x02\x09\x09\x09\x09\x09"))
	f.Add([]byte("aggregation:\x01\x01\x00\x01\x00\x01\x03\x01\x01\x00\x03\x00\x01\x02\x01\x01\x01\x05\x09\x01\x09\x02"))
	users := fzUsers()
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &bytes{b: data}
		r, ref := NewRBAC(), newReference()
		check := func(a Attributes) {
			d, reason := r.Authorize(a)
			grants := ref.grants(a)
			if (d == Allow) != (len(grants) > 0) || d == Deny {
				t.Fatalf("%s: got %v %q, reference grants %v", describe(a), d, reason, grants)
			}
			if d == Allow && !slices.ContainsFunc(grants, func(g refGrant) bool { return g.reason == reason }) {
				t.Fatalf("%s: reason %q, reference grants %v", describe(a), reason, grants)
			}
		}
		apply := func(obj runtime.Object, del bool) {
			if del {
				_ = r.Delete(obj)
				ref.delete(obj)
			} else {
				_ = r.Upsert(obj)
				ref.upsert(obj)
			}
		}
		for ops := 0; !s.done() && ops < 64; ops++ {
			op := s.next() % 10
			del := op >= 4 && op < 8
			meta := metav1.ObjectMeta{Name: s.pick(fzRoles), Namespace: s.pick(fzNamespaces[:2])}
			switch op % 4 {
			case 0:
				apply(&rbacv1.Role{ObjectMeta: meta, Rules: s.rules()}, del)
			case 1:
				meta.Namespace = ""
				meta.Labels = s.labels()
				c := &rbacv1.ClusterRole{ObjectMeta: meta, Rules: s.rules()}
				if s.next()%3 == 0 {
					c.AggregationRule = &rbacv1.AggregationRule{}
					for range s.next() % 3 {
						c.AggregationRule.ClusterRoleSelectors = append(c.AggregationRule.ClusterRoleSelectors,
							metav1.LabelSelector{MatchLabels: s.labels()})
					}
				}
				apply(c, del)
			case 2:
				meta.Name = "rb-" + s.pick(fzRoles)
				apply(&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: s.roleRef(), Subjects: s.subjects()}, del)
			case 3:
				meta.Namespace = ""
				meta.Name = "crb-" + s.pick(fzRoles)
				apply(&rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: s.roleRef(), Subjects: s.subjects()}, del)
			}
			if op >= 8 {
				check(s.attrs(users))
			}
		}
		// Then a sweep: every user, in every scope, makes a few fixed
		// requests and those that aim at each rule present.
		sweep := []Attributes{
			{IsResourceRequest: true, Verb: "get", Resource: "pods", Name: "a"},
			{IsResourceRequest: true, Verb: "list", APIGroup: "apps", Resource: "deployments", Subresource: "scale"},
			{IsResourceRequest: true, Verb: "create", Resource: "pods", Subresource: "log", Name: "b"},
			{Verb: "get", Path: "/a/b"},
		}
		sweep = append(sweep, aimAt(ref)...)
		for _, u := range users {
			for _, ns := range fzNamespaces {
				for _, a := range sweep {
					a.User = u
					if a.IsResourceRequest {
						a.Namespace = ns
					}
					check(a)
				}
				rules, err := r.RulesFor(u, ns)
				var got []string
				for _, rule := range rules {
					got = append(got, fmt.Sprintf("%#v", rule))
				}
				slices.Sort(got)
				want, missing := ref.rulesFor(u, ns)
				if !slices.Equal(got, want) || (err != nil) != (missing > 0) {
					t.Fatalf("RulesFor(%s, %q): got %v (%v), want %v (%d missing)", u.GetName(), ns, got, err, want, missing)
				}
			}
		}
		agg := ref.aggregated()
		for name, c := range ref.clusterRoles {
			got, ok := r.ClusterRoleRules(name)
			if !ok {
				t.Fatalf("cluster role %s is missing", name)
			}
			if c.AggregationRule != nil && !sameRuleSet(got, agg[name]) {
				t.Fatalf("aggregated %s: got %v, want %v", name, got, agg[name])
			}
		}
	})
}

// FuzzRuleAllows compares the matcher with the reference on arbitrary
// strings (a comma separates the entries of a rule's list).
func FuzzRuleAllows(f *testing.F) {
	f.Add("get,list", ",apps", "pods/log,*/scale", "a", "", "get", "", "pods", "log", "a", "/a", true)
	f.Add("*", "*", "*", "", "/logs/*,/a**", "get", "apps", "deployments", "scale", "", "/logs/x", false)
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	f.Fuzz(func(t *testing.T, rv, rg, rr, rn, ru, verb, group, resource, sub, name, path string, isResource bool) {
		r := rbacv1.PolicyRule{Verbs: split(rv), APIGroups: split(rg), Resources: split(rr), ResourceNames: split(rn), NonResourceURLs: split(ru)}
		a := Attributes{IsResourceRequest: isResource, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name, Path: path}
		if got, want := RuleAllows(&a, &r), refRuleAllows(a, r); got != want {
			t.Fatalf("rule %+v, request %+v: got %v, want %v", r, a, got, want)
		}
	})
}
