package admission

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NamespaceLabels reads a namespace's labels (live).
type NamespaceLabels interface {
	NamespaceLabels(ctx context.Context, name string) (map[string]string, error)
}

// MatchesRule says whether r selects a's operation, group, version,
// resource, subresource and scope. kgate serves one version of each
// resource, so matchPolicy Equivalent and Exact agree.
func MatchesRule(r admissionregistrationv1.RuleWithOperations, a *Attributes) bool {
	if !anyOf(opStrings(r.Operations), string(a.Operation)) {
		return false
	}
	gvr := a.GVR()
	if !anyOf(r.APIGroups, gvr.Group) || !anyOf(r.APIVersions, gvr.Version) {
		return false
	}
	if !resourceMatches(r.Resources, gvr.Resource, a.Subresource) {
		return false
	}
	if r.Scope != nil {
		switch *r.Scope {
		case admissionregistrationv1.ClusterScope:
			if a.Resource.Namespaced {
				return false
			}
		case admissionregistrationv1.NamespacedScope:
			if !a.Resource.Namespaced {
				return false
			}
		}
	}
	return true
}

func opStrings(ops []admissionregistrationv1.OperationType) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

func anyOf(list []string, v string) bool {
	for _, l := range list {
		if l == "*" || l == v {
			return true
		}
	}
	return false
}

// resourceMatches is upstream's rule: "pods" matches the resource only,
// "pods/status" one subresource, "pods/*" the resource and every
// subresource, "*" every resource, "*/status" every status.
func resourceMatches(patterns []string, resource, sub string) bool {
	for _, p := range patterns {
		res, s, hasSub := strings.Cut(p, "/")
		if res != "*" && res != resource {
			continue
		}
		switch {
		case !hasSub && sub == "":
			return true
		case hasSub && s == "*":
			return true
		case hasSub && s == sub:
			return true
		}
	}
	return false
}

// ObjectSelected says whether ls selects a's object or old object.
func ObjectSelected(ls *metav1.LabelSelector, a *Attributes) (bool, error) {
	if ls == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return false, err
	}
	if sel.Empty() {
		return true, nil
	}
	for _, o := range []any{a.Object, a.OldObject} {
		if o == nil {
			continue
		}
		if m, err := meta.Accessor(o); err == nil && sel.Matches(labels.Set(m.GetLabels())) {
			return true, nil
		}
	}
	return false, nil
}

// NamespaceSelected is upstream's rule: cluster-scoped objects other than
// namespaces always match; a namespace is matched by its own labels.
func NamespaceSelected(ctx context.Context, ns NamespaceLabels, ls *metav1.LabelSelector, a *Attributes) (bool, error) {
	if ls == nil {
		return true, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return false, err
	}
	if sel.Empty() {
		return true, nil
	}
	gvr := a.GVR()
	if gvr.Group == "" && gvr.Resource == "namespaces" {
		for _, o := range []any{a.Object, a.OldObject} {
			if o == nil {
				continue
			}
			if m, err := meta.Accessor(o); err == nil {
				return sel.Matches(labels.Set(m.GetLabels())), nil
			}
		}
		return false, nil
	}
	if !a.Resource.Namespaced || a.Namespace == "" {
		return true, nil
	}
	l, err := ns.NamespaceLabels(ctx, a.Namespace)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(l)), nil
}
