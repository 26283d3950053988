package authz

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// RuleAllows reports whether rule grants the request a, with the matching
// of kube-apiserver (plugin/pkg/auth/authorizer/rbac RuleAllows and
// pkg/apis/rbac/v1 evaluation helpers). It does not allocate.
func RuleAllows(a *Attributes, rule *rbacv1.PolicyRule) bool {
	if !verbMatches(rule.Verbs, a.Verb) {
		return false
	}
	if !a.IsResourceRequest {
		return urlMatches(rule.NonResourceURLs, a.Path)
	}
	return groupMatches(rule.APIGroups, a.APIGroup) &&
		resourceMatches(rule.Resources, a.Resource, a.Subresource) &&
		nameMatches(rule.ResourceNames, a.Name)
}

func verbMatches(verbs []string, verb string) bool {
	for _, v := range verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func groupMatches(groups []string, group string) bool {
	for _, g := range groups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

// resourceMatches matches "*", the resource or "resource/subresource"
// exactly, and "*/subresource" for any resource, without building the
// combined string.
func resourceMatches(resources []string, resource, sub string) bool {
	for _, r := range resources {
		if r == rbacv1.ResourceAll {
			return true
		}
		if sub == "" {
			if r == resource {
				return true
			}
			continue
		}
		if len(r) == len(resource)+1+len(sub) && r[len(resource)] == '/' &&
			strings.HasPrefix(r, resource) && strings.HasSuffix(r, sub) {
			return true
		}
		if len(r) == len(sub)+2 && r[0] == '*' && r[1] == '/' && r[2:] == sub {
			return true
		}
	}
	return false
}

// nameMatches: a rule without resourceNames matches every request; one
// with resourceNames only requests for one of those names. Requests
// without a name (create, list, watch, deletecollection) have the name "".
func nameMatches(names []string, name string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// urlMatches matches "*", the path exactly, and a pattern ending in "*" as
// a prefix of the path (all trailing stars removed, as upstream).
func urlMatches(urls []string, path string) bool {
	for _, u := range urls {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}

// rulesEqual is equality.Semantic.DeepEqual for rules: nil and empty
// slices are equal.
func rulesEqual(a, b *rbacv1.PolicyRule) bool {
	return stringsEqual(a.Verbs, b.Verbs) && stringsEqual(a.APIGroups, b.APIGroups) &&
		stringsEqual(a.Resources, b.Resources) && stringsEqual(a.ResourceNames, b.ResourceNames) &&
		stringsEqual(a.NonResourceURLs, b.NonResourceURLs)
}

func stringsEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
