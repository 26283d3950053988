package authz

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
)

var (
	genVerbs      = list("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "proxy")
	genGroups     = list("", "", "", "apps", "batch", "rbac.authorization.k8s.io", "coordination.k8s.io", "extensions", "custom.io", "authorization.k8s.io", "resource.k8s.io")
	genResources  = list("pods", "pods", "configmaps", "secrets", "deployments", "jobs", "leases", "roles", "rolebindings", "serviceaccounts", "namespaces", "nodes", "selfsubjectaccessreviews", "widgets", "replicasets", "resourceclaims")
	genSubs       = list("", "", "", "", "", "status", "log", "scale", "token", "exec", "binding", "xlog", "rescale")
	genNamespaces = list("", "a", "a", "b", "b", "c", "kube-system", "d")
	genNames      = list("", "cm1", "cm2", "s1", "web", "x", "kube-scheduler")
	genPaths      = list("/healthz", "/healthz/etcd", "/livez", "/readyz/ping", "/metrics", "/metrics/slis", "/logs", "/logs/", "/logs/kube.log",
		"/debug", "/debug/pprof", "/debu", "/api", "/api/v1", "/apis", "/apis/custom.io", "/apis/custom.io/v1", "/version", "/version/", "/openapi/v2",
		"/.well-known/openid-configuration", "/")
	genURLVerbs = list("get", "get", "get", "post", "put", "delete", "head")
)

func pick(rng *rand.Rand, xs []string) string { return xs[rng.IntN(len(xs))] }

// genAttrs draws a request the way requestinfo produces them: list, watch,
// create and deletecollection of a resource carry no name.
func genAttrs(rng *rand.Rand, users []user.Info) Attributes {
	a := Attributes{User: users[rng.IntN(len(users))]}
	if rng.IntN(4) == 0 {
		a.Verb, a.Path = pick(rng, genURLVerbs), pick(rng, genPaths)
		return a
	}
	a.IsResourceRequest = true
	a.Verb, a.APIGroup, a.Resource = pick(rng, genVerbs), pick(rng, genGroups), pick(rng, genResources)
	a.Subresource, a.Namespace = pick(rng, genSubs), pick(rng, genNamespaces)
	switch a.Verb {
	case "list", "watch", "create", "deletecollection":
		if a.Subresource == "" {
			break
		}
		fallthrough
	default:
		a.Name = pick(rng, genNames)
		if a.Subresource != "" && a.Name == "" {
			a.Name = "x"
		}
	}
	a.Path = "/apis/" + a.APIGroup + "/v1/" + a.Resource
	return a
}

// target is a subject of a binding, as a user, with the rules the binding
// grants it and where.
type target struct {
	user      user.Info
	namespace string // "" for a ClusterRoleBinding
	rules     []rbacv1.PolicyRule
}

func targets(ref *reference, users []user.Info) []target {
	var out []target
	add := func(ns string, rr rbacv1.RoleRef, subjects []rbacv1.Subject) {
		rules, ok := ref.roleRefRules(ns, rr)
		if !ok || len(rules) == 0 {
			return
		}
		for _, s := range subjects {
			var u user.Info
			switch s.Kind {
			case rbacv1.UserKind:
				u = usr(s.Name)
				for _, f := range users {
					if f.GetName() == s.Name {
						u = f
					}
				}
			case rbacv1.GroupKind:
				u = usr("member-of-"+s.Name, s.Name)
			case rbacv1.ServiceAccountKind:
				sns := s.Namespace
				if sns == "" {
					sns = ns
				}
				u = saUser(sns, s.Name)
			default:
				continue
			}
			out = append(out, target{user: u, namespace: ns, rules: rules})
		}
	}
	for _, b := range ref.clusterRoleBindings {
		add("", b.RoleRef, b.Subjects)
	}
	for _, b := range ref.roleBindings {
		add(b.Namespace, b.RoleRef, b.Subjects)
	}
	slices.SortFunc(out, func(a, b target) int { return strings.Compare(describeTarget(a), describeTarget(b)) })
	return out
}

func describeTarget(t target) string {
	return t.user.GetName() + "@" + t.namespace + fmt.Sprint(t.rules)
}

// genNear draws a request close to what a binding grants its subject, so
// that rules with resourceNames, subresources and URL patterns get hits
// and near misses: the subject, namespace, verb, group, resource and name
// each come from the grant most of the time and at random otherwise.
func genNear(rng *rand.Rand, users []user.Info, tgs []target) Attributes {
	tg := tgs[rng.IntN(len(tgs))]
	r := tg.rules[rng.IntN(len(tg.rules))]
	a := genAttrs(rng, users)
	if rng.IntN(4) > 0 {
		a.User = tg.user
	}
	star := func(xs []string, alt []string) string {
		if len(xs) == 0 || rng.IntN(8) == 0 {
			return pick(rng, alt)
		}
		if x := pick(rng, xs); x != "*" {
			return x
		}
		return pick(rng, alt)
	}
	if len(r.NonResourceURLs) > 0 {
		a.IsResourceRequest = false
		a.Verb = star(r.Verbs, genURLVerbs)
		a.Path = star(r.NonResourceURLs, genPaths)
		if strings.HasSuffix(a.Path, "*") {
			a.Path = strings.TrimRight(a.Path, "*") + pick(rng, list("", "x", "/y"))
		}
		a.Namespace, a.APIGroup, a.Resource, a.Subresource, a.Name = "", "", "", "", ""
		return a
	}
	a.IsResourceRequest = true
	if tg.namespace != "" && rng.IntN(4) > 0 {
		a.Namespace = tg.namespace
	}
	a.Verb = star(r.Verbs, genVerbs)
	a.APIGroup = star(r.APIGroups, genGroups)
	res, sub, _ := strings.Cut(star(r.Resources, genResources), "/")
	if res == "*" {
		res = pick(rng, genResources)
	}
	a.Resource, a.Subresource = res, sub
	if rng.IntN(4) == 0 {
		a.Subresource = pick(rng, genSubs)
	}
	a.Name = ""
	if rng.IntN(3) > 0 {
		a.Name = star(r.ResourceNames, genNames)
	}
	return a
}

func describe(a Attributes) string {
	if !a.IsResourceRequest {
		return fmt.Sprintf("%s %v: %s %s", a.User.GetName(), a.User.GetGroups(), a.Verb, a.Path)
	}
	return fmt.Sprintf("%s %v: %s group=%q resource=%q sub=%q ns=%q name=%q", a.User.GetName(), a.User.GetGroups(),
		a.Verb, a.APIGroup, a.Resource, a.Subresource, a.Namespace, a.Name)
}

// TestDecisionTable checks 20,000 generated requests (half of them drawn
// near what a binding grants) of the fixture's users
// against the brute-force reference evaluator: the decision, and that an
// Allow names a binding that does allow it.
func TestDecisionTable(t *testing.T) {
	objs := fixture()
	r, ref := load(objs)
	users := fixtureUsers()
	tgs := targets(ref, users)
	rng := rand.New(rand.NewPCG(7, 11))
	var allow, deny, aggregated, names, sub, nonres, sa, roleInNS int
	const n = 20000
	for i := range n {
		a := genAttrs(rng, users)
		if i%2 == 1 {
			a = genNear(rng, users, tgs)
		}
		d, reason := r.Authorize(a)
		grants := ref.grants(a)
		if d == Deny {
			t.Fatalf("%s: RBAC never denies, got Deny", describe(a))
		}
		if (d == Allow) != (len(grants) > 0) {
			t.Fatalf("%s: got %v (%q), reference allows through %d bindings %v", describe(a), d, reason, len(grants), grants)
		}
		if d != Allow {
			deny++
			continue
		}
		allow++
		found := false
		for _, g := range grants {
			found = found || g.reason == reason
		}
		if !found {
			t.Fatalf("%s: reason %q names no binding that allows it; reference: %v", describe(a), reason, grants)
		}
		g := grants[0]
		for _, x := range grants {
			if x.reason == reason {
				g = x
			}
		}
		// Count what only one grant could allow, to show each path is
		// exercised on its own.
		if len(grants) == 1 {
			if g.aggregated {
				aggregated++
			}
			if g.names {
				names++
			}
			if g.sa {
				sa++
			}
			if g.roleInNS {
				roleInNS++
			}
			if a.Subresource != "" {
				sub++
			}
			if !a.IsResourceRequest {
				nonres++
			}
		}
	}
	t.Logf("%d requests: %d allowed, %d not; sole grant via aggregated role %d, resourceNames %d, subresource %d, nonResourceURL %d, service account %d, RoleBinding of ClusterRole %d",
		n, allow, deny, aggregated, names, sub, nonres, sa, roleInNS)
	for what, c := range map[string]int{"allowed": allow, "denied": deny, "aggregated": aggregated, "resourceNames": names,
		"subresource": sub, "nonResourceURL": nonres, "service account": sa, "RoleBinding of ClusterRole": roleInNS} {
		if c < 20 {
			t.Errorf("only %d requests exercise %s", c, what)
		}
	}
}

// TestAggregationMatchesController compares the aggregated rules with the
// reference controller run to a fixed point: in the same order where the
// aggregation graph has no cycle, as sets otherwise.
func TestAggregationMatchesController(t *testing.T) {
	r, ref := load(fixture())
	want := ref.aggregated()
	for _, name := range list("admin", "edit", "view", "agg-team", "agg-nested") {
		got, _ := r.ClusterRoleRules(name)
		if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want[name]) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want[name])
		}
		if len(got) == 0 {
			t.Errorf("%s aggregates nothing", name)
		}
	}
	for _, name := range list("cycle-1", "cycle-2") {
		got, _ := r.ClusterRoleRules(name)
		if !sameRuleSet(got, want[name]) || len(got) != 1 {
			t.Errorf("%s:\n got %v\nwant %v (the leaf's one rule)", name, got, want[name])
		}
	}
}

func sameRuleSet(a, b []rbacv1.PolicyRule) bool {
	key := func(rs []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%q|%q|%q|%q|%q", r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(key(a), key(b))
}

func TestRulesForMatchesReference(t *testing.T) {
	r, ref := load(fixture())
	for _, u := range fixtureUsers() {
		for _, ns := range genNamespaces {
			rules, err := r.RulesFor(u, ns)
			var got []string
			for _, rule := range rules {
				got = append(got, fmt.Sprintf("%#v", rule))
			}
			slices.Sort(got)
			want, missing := ref.rulesFor(u, ns)
			if !slices.Equal(got, want) {
				t.Errorf("%s in %q: got %d rules, want %d", u.GetName(), ns, len(got), len(want))
			}
			if (err != nil) != (missing > 0) {
				t.Errorf("%s in %q: error %v, reference has %d missing roles", u.GetName(), ns, err, missing)
			}
		}
	}
}

func TestPendingAggregations(t *testing.T) {
	r, _ := load(fixture())
	pending := r.PendingAggregations()
	var names []string
	for _, p := range pending {
		names = append(names, p.Name)
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "admin") || !slices.Contains(names, "view") {
		t.Fatalf("pending %v: want the aggregated roles with empty stored rules, sorted", names)
	}
	// Storing the aggregated rules (what the gateway writes) settles a
	// role; changing a member makes it pending again.
	for _, p := range pending {
		got, _ := r.ClusterRoleRules(p.Name)
		if !sameRules(got, p.Rules) {
			t.Fatalf("%s: pending rules differ from the authorizer's", p.Name)
		}
		stored := fixtureClusterRole(t, r, p.Name)
		stored.Rules = slices.Clone(p.Rules)
		r.UpsertClusterRole(stored)
	}
	if p := r.PendingAggregations(); len(p) != 0 {
		t.Fatalf("still pending after storing the aggregated rules: %v", p)
	}
	r.UpsertClusterRole(&rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "extra-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}},
	})
	found := false
	for _, p := range r.PendingAggregations() {
		if p.Name == "view" {
			found = slices.ContainsFunc(p.Rules, func(rule rbacv1.PolicyRule) bool { return slices.Equal(rule.Resources, []string{"widgets"}) })
		}
	}
	if !found {
		t.Fatalf("view is not pending with the new member's rule: %v", r.PendingAggregations())
	}
}

// fixtureClusterRole returns a copy of the stored ClusterRole name.
func fixtureClusterRole(t *testing.T, r *RBAC, name string) *rbacv1.ClusterRole {
	t.Helper()
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := r.clusterRoles[name]
	if c == nil {
		t.Fatalf("no cluster role %s", name)
	}
	return c.obj.DeepCopy()
}
