package authz

import (
	"fmt"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
)

// benchRBAC is the bootstrap policy plus n bindings: per namespace, five
// users with view, a group with edit, a lead with admin, a service
// account and the namespace's service-account group with a Role; and
// n/10 ClusterRoleBindings of custom ClusterRoles.
func benchRBAC(n int) *RBAC {
	r := bootstrapped()
	namespaces := n * 9 / 10 / 9
	for i := range namespaces {
		ns := fmt.Sprintf("ns-%d", i)
		r.UpsertRole(role(ns, "app", rule(list("get", "list", "watch"), list(""), list("configmaps", "secrets"))))
		for j := range 5 {
			r.UpsertRoleBinding(roleBinding(ns, fmt.Sprintf("view-%d", j), "ClusterRole", "view", userSubj(fmt.Sprintf("user-%d", i*5+j))))
		}
		r.UpsertRoleBinding(roleBinding(ns, "edit", "ClusterRole", "edit", groupSubj(fmt.Sprintf("team-%d", i))))
		r.UpsertRoleBinding(roleBinding(ns, "admin", "ClusterRole", "admin", userSubj(fmt.Sprintf("lead-%d", i))))
		r.UpsertRoleBinding(roleBinding(ns, "app", "Role", "app", saSubj("", "app")))
		r.UpsertRoleBinding(roleBinding(ns, "sas", "Role", "app", groupSubj("system:serviceaccounts:"+ns)))
	}
	for k := range n - namespaces*9 {
		name := fmt.Sprintf("custom-%d", k)
		r.UpsertClusterRole(cRole(name, nil,
			rule(list("get", "list", "watch"), list("example.com"), list(fmt.Sprintf("widgets-%d", k))),
			rule(list("update"), list("example.com"), list(fmt.Sprintf("widgets-%d/status", k))),
			urlRule(list("get"), fmt.Sprintf("/custom/%d/*", k))))
		r.UpsertClusterRoleBinding(clusterRoleBinding(name, name, userSubj(fmt.Sprintf("ops-%d", k)), groupSubj(fmt.Sprintf("ops-group-%d", k%10))))
	}
	return r
}

func benchCases() []struct {
	name string
	a    Attributes
	want Decision
} {
	authn := user.AllAuthenticated
	res := func(u user.Info, verb, group, resource, sub, ns, name string) Attributes {
		return Attributes{User: u, IsResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	return []struct {
		name string
		a    Attributes
		want Decision
	}{
		{"allow-view-rolebinding", res(usr("user-7", authn), "list", "apps", "deployments", "", "ns-1", ""), Allow},
		{"allow-edit-group", res(usr("dev", "team-3", authn), "create", "", "pods", "", "ns-3", ""), Allow},
		{"allow-admin-aggregated", res(usr("lead-4", authn), "update", "rbac.authorization.k8s.io", "rolebindings", "", "ns-4", "rb"), Allow},
		{"allow-serviceaccount", saAttrs(), Allow},
		{"allow-clusterrolebinding", res(usr("ops-3", "ops-group-3", authn), "update", "example.com", "widgets-3", "status", "ns-9", "w"), Allow},
		{"allow-nonresource", Attributes{User: usr("user-7", authn), Verb: "get", Path: "/apis/apps/v1"}, Allow},
		{"deny-other-namespace", res(usr("user-7", authn), "list", "", "pods", "", "ns-50", ""), NoOpinion},
		{"deny-cluster-wide", res(usr("user-7", authn), "list", "", "pods", "", "", ""), NoOpinion},
		{"deny-verb", res(usr("user-7", authn), "delete", "", "pods", "", "ns-1", "p"), NoOpinion},
	}
}

func saAttrs() Attributes {
	a := Attributes{User: saUser("ns-5", "app"), IsResourceRequest: true, Verb: "get", Resource: "configmaps", Namespace: "ns-5", Name: "cfg"}
	return a
}

// BenchmarkAuthorize decides requests against 1,000 bindings (plus the
// 12 bootstrap ones).
func BenchmarkAuthorize(b *testing.B) {
	r := benchRBAC(1000)
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			if d, reason := r.Authorize(c.a); d != c.want {
				b.Fatalf("got %v (%s), want %v", d, reason, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				r.Authorize(c.a)
			}
		})
	}
}

// BenchmarkAuthorizeScale shows that a decision does not depend on the
// number of bindings, only on those of the user and its groups.
func BenchmarkAuthorizeScale(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		r := benchRBAC(n)
		a := benchCases()[0].a
		b.Run(fmt.Sprintf("bindings=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Authorize(a)
			}
		})
	}
}

// BenchmarkAuthorizeChain is the gateway's chain (system:masters, then
// RBAC), from several goroutines.
func BenchmarkAuthorizeChain(b *testing.B) {
	a, err := New(Config{}, benchRBAC(1000))
	if err != nil {
		b.Fatal(err)
	}
	c := benchCases()[0].a
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.Authorize(c)
		}
	})
}
