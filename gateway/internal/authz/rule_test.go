package authz

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRuleAllows(t *testing.T) {
	res := func(verb, group, resource, sub, name string) Attributes {
		return Attributes{IsResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name}
	}
	url := func(verb, path string) Attributes { return Attributes{Verb: verb, Path: path} }
	pods := list("pods")
	core := list("")
	cases := []struct {
		name string
		rule rbacv1.PolicyRule
		a    Attributes
		want bool
	}{
		{"exact", rule(list("get"), core, pods), res("get", "", "pods", "", "p"), true},
		{"other verb", rule(list("get"), core, pods), res("list", "", "pods", "", ""), false},
		{"verb is case sensitive", rule(list("GET"), core, pods), res("get", "", "pods", "", ""), false},
		{"verb *", rule(list("*"), core, pods), res("deletecollection", "", "pods", "", ""), true},
		{"no verbs", rule(nil, core, pods), res("get", "", "pods", "", ""), false},
		{"core group is not apps", rule(list("get"), core, list("deployments")), res("get", "apps", "deployments", "", ""), false},
		{"group *", rule(list("get"), list("*"), list("deployments")), res("get", "apps", "deployments", "", ""), true},
		{"no groups", rule(list("get"), nil, pods), res("get", "", "pods", "", ""), false},
		{"resource * covers subresources", rule(list("get"), core, list("*")), res("get", "", "pods", "log", "p"), true},
		{"resource does not cover its subresources", rule(list("get"), core, pods), res("get", "", "pods", "log", "p"), false},
		{"subresource does not cover the resource", rule(list("get"), core, list("pods/log")), res("get", "", "pods", "", "p"), false},
		{"resource/subresource", rule(list("get"), core, list("pods/log")), res("get", "", "pods", "log", "p"), true},
		{"other resource's subresource", rule(list("get"), core, list("pods/log")), res("get", "", "nodes", "log", "p"), false},
		{"*/subresource", rule(list("update"), list("*"), list("*/scale")), res("update", "apps", "deployments", "scale", "d"), true},
		{"*/subresource is not the resource", rule(list("update"), list("*"), list("*/scale")), res("update", "apps", "deployments", "", "d"), false},
		{"*/subresource is not a prefix", rule(list("update"), list("*"), list("*/scale")), res("update", "apps", "deployments", "scalex", "d"), false},
		{"*/subresource is not a suffix", rule(list("update"), list("*"), list("*/scale")), res("update", "apps", "deployments", "rescale", "d"), false},
		{"resource/subresource is whole", rule(list("get"), core, list("pods/xlog")), res("get", "", "pods", "log", "p"), false},
		{"*/subresource is whole", rule(list("get"), core, list("*/xlog")), res("get", "", "pods", "log", "p"), false},
		{"resource/* is no wildcard", rule(list("get"), core, list("pods/*")), res("get", "", "pods", "log", "p"), false},
		{"resource/* matches subresource *", rule(list("get"), core, list("pods/*")), res("get", "", "pods", "*", "p"), true},
		{"prefix of resource", rule(list("get"), core, list("pod")), res("get", "", "pods", "", ""), false},
		{"resource/subresource with a longer resource", rule(list("get"), core, list("pods/log")), res("get", "", "podsx", "log", ""), false},
		{"resourceNames match the name", rule(list("get"), core, list("configmaps"), "a", "b"), res("get", "", "configmaps", "", "b"), true},
		{"resourceNames miss", rule(list("get"), core, list("configmaps"), "a"), res("get", "", "configmaps", "", "c"), false},
		{"resourceNames never match list", rule(list("list"), core, list("configmaps"), "a"), res("list", "", "configmaps", "", ""), false},
		{"resourceNames never match create", rule(list("create"), core, list("configmaps"), "a"), res("create", "", "configmaps", "", ""), false},
		{"resourceNames never match watch", rule(list("watch"), core, list("configmaps"), "a"), res("watch", "", "configmaps", "", ""), false},
		{"resourceNames never match deletecollection", rule(list("deletecollection"), core, list("configmaps"), "a"), res("deletecollection", "", "configmaps", "", ""), false},
		// A single-object watch (fieldSelector metadata.name=a) has the name.
		{"resourceNames match a watch of one name", rule(list("watch"), core, list("configmaps"), "a"), res("watch", "", "configmaps", "", "a"), true},
		// Upstream quirk kept: an empty resource name matches requests without a name.
		{"resourceName empty matches no name", rule(list("list"), core, list("configmaps"), ""), res("list", "", "configmaps", "", ""), true},
		{"resourceNames with subresource", rule(list("update"), core, list("pods/status"), "p"), res("update", "", "pods", "status", "p"), true},
		{"resource rule never matches a URL", rule(list("*"), list("*"), list("*")), url("get", "/healthz"), false},
		{"URL rule never matches a resource", urlRule(list("*"), "*"), res("get", "", "pods", "", ""), false},
		{"URL exact", urlRule(list("get"), "/healthz"), url("get", "/healthz"), true},
		{"URL exact only", urlRule(list("get"), "/healthz"), url("get", "/healthz/etcd"), false},
		{"URL other verb", urlRule(list("get"), "/healthz"), url("post", "/healthz"), false},
		{"URL *", urlRule(list("get"), "*"), url("get", "/anything/at/all"), true},
		{"URL prefix/*", urlRule(list("get"), "/logs/*"), url("get", "/logs/kube.log"), true},
		{"URL prefix/* matches prefix/", urlRule(list("get"), "/logs/*"), url("get", "/logs/"), true},
		{"URL prefix/* misses prefix", urlRule(list("get"), "/logs/*"), url("get", "/logs"), false},
		{"URL prefix* matches prefix", urlRule(list("get"), "/logs*"), url("get", "/logs"), true},
		{"URL prefix* matches longer names", urlRule(list("get"), "/logs*"), url("get", "/logsx"), true},
		{"URL trailing stars all trimmed", urlRule(list("get"), "/debug**"), url("get", "/debug/pprof"), true},
		{"URL star inside is literal", urlRule(list("get"), "/a/*/b"), url("get", "/a/x/b"), false},
		{"URL star inside matches itself", urlRule(list("get"), "/a/*/b"), url("get", "/a/*/b"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RuleAllows(&c.a, &c.rule); got != c.want {
				t.Errorf("RuleAllows = %v, want %v", got, c.want)
			}
			if got := refRuleAllows(c.a, c.rule); got != c.want {
				t.Errorf("reference = %v, want %v", got, c.want)
			}
		})
	}
}

// TestRuleAllowsExhaustive compares RuleAllows with the reference over
// every rule and request built from small alphabets chosen to hit each
// edge: wildcards, near-miss resources and subresources, names, URLs.
func TestRuleAllowsExhaustive(t *testing.T) {
	verbs := [][]string{nil, {"get"}, {"*"}, {"GET"}, {"list", "get"}}
	groups := [][]string{nil, {""}, {"apps"}, {"*"}}
	resources := [][]string{nil, {}, {"*"}, {"pods"}, {"pod"}, {"pods/log"}, {"pods/xlog"}, {"*/log"}, {"*/xlog"}, {"pods/*"},
		{"*/*"}, {"log"}, {"/log"}, {"pods/"}, {"podsx/log"}, {"pods/log/x"}, {"*/log/x"}, {"deployments", "pods/log"}}
	names := [][]string{nil, {}, {"a"}, {""}, {"b", "a"}}
	urls := [][]string{nil, {"*"}, {"/a"}, {"/a/*"}, {"/a*"}, {"/a**"}, {"**"}, {""}, {"/a/*/c"}, {"/b", "/a/b"}}
	reqVerbs := list("get", "list", "GET", "*")
	reqGroups := list("", "apps", "*")
	reqResources := list("pods", "pod", "podsx", "log", "*", "")
	reqSubs := list("", "log", "xlog", "*", "log/x", "/log")
	reqNames := list("", "a", "b")
	paths := list("", "/", "/a", "/a/", "/a/b", "/ab", "/b", "/a/*/c", "/a/x/c", "*")
	n := 0
	for _, v := range verbs {
		for _, g := range groups {
			for _, rs := range resources {
				for _, nm := range names {
					r := rbacv1.PolicyRule{Verbs: v, APIGroups: g, Resources: rs, ResourceNames: nm}
					for _, rv := range reqVerbs {
						for _, rg := range reqGroups {
							for _, rr := range reqResources {
								for _, sub := range reqSubs {
									for _, name := range reqNames {
										a := Attributes{IsResourceRequest: true, Verb: rv, APIGroup: rg, Resource: rr, Subresource: sub, Name: name}
										n++
										if got, want := RuleAllows(&a, &r), refRuleAllows(a, r); got != want {
											t.Fatalf("rule %+v, request %+v: got %v, want %v", r, a, got, want)
										}
									}
								}
							}
						}
					}
				}
			}
		}
		for _, u := range urls {
			r := rbacv1.PolicyRule{Verbs: v, NonResourceURLs: u}
			for _, rv := range reqVerbs {
				for _, p := range paths {
					a := Attributes{Verb: rv, Path: p}
					n++
					if got, want := RuleAllows(&a, &r), refRuleAllows(a, r); got != want {
						t.Fatalf("rule %+v, request %+v: got %v, want %v", r, a, got, want)
					}
				}
			}
		}
	}
	t.Logf("%d comparisons", n)
}
