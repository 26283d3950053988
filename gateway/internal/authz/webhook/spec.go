package webhook

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kgate/kgate/gateway/internal/authz"
)

// Spec is the SubjectAccessReview spec kube-apiserver's webhook sends for
// a: the user (name, uid, groups, extra) and either the resource
// attributes, with the request's field and label selectors as
// requirements, or the non-resource path and verb.
func Spec(a authz.Attributes) authorizationv1.SubjectAccessReviewSpec {
	var s authorizationv1.SubjectAccessReviewSpec
	if u := a.User; u != nil {
		s.User, s.UID, s.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); extra != nil {
			s.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
			for k, v := range extra {
				s.Extra[k] = v
			}
		}
	}
	if !a.IsResourceRequest {
		s.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.Path, Verb: a.Verb}
		return s
	}
	ra := &authorizationv1.ResourceAttributes{
		Namespace: a.Namespace, Verb: a.Verb, Group: a.APIGroup, Version: a.APIVersion,
		Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
	}
	if reqs := fieldRequirements(a.FieldSelector); len(reqs) > 0 {
		ra.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: reqs}
	}
	if reqs := labelRequirements(a.LabelSelector); len(reqs) > 0 {
		ra.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: reqs}
	}
	s.ResourceAttributes = ra
	return s
}

// fieldRequirements converts a fieldSelector as kube-apiserver does: a
// selector that does not parse is left out, = and == become In, != NotIn,
// other operators are dropped (requirements are ANDed, so dropping one
// only broadens what is asked).
func fieldRequirements(raw string) []metav1.FieldSelectorRequirement {
	if raw == "" {
		return nil
	}
	sel, err := fields.ParseSelector(raw)
	if err != nil {
		return nil
	}
	var out []metav1.FieldSelectorRequirement
	for _, r := range sel.Requirements() {
		var op metav1.FieldSelectorOperator
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.FieldSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.FieldSelectorOpNotIn
		default:
			continue
		}
		out = append(out, metav1.FieldSelectorRequirement{Key: r.Field, Operator: op, Values: []string{r.Value}})
	}
	return out
}

// labelRequirements converts a labelSelector as kube-apiserver does.
func labelRequirements(raw string) []metav1.LabelSelectorRequirement {
	if raw == "" {
		return nil
	}
	sel, err := labels.Parse(raw)
	if err != nil {
		return nil
	}
	reqs, _ := sel.Requirements()
	var out []metav1.LabelSelectorRequirement
	for _, r := range reqs {
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			continue
		}
		lr := metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op}
		if vs := r.ValuesUnsorted(); len(vs) > 0 {
			lr.Values = vs
		}
		out = append(out, lr)
	}
	return out
}

// v1beta1Spec is spec in authorization.k8s.io/v1beta1 (groups are
// "group" there).
func v1beta1Spec(in authorizationv1.SubjectAccessReviewSpec) authorizationv1beta1.SubjectAccessReviewSpec {
	out := authorizationv1beta1.SubjectAccessReviewSpec{User: in.User, UID: in.UID, Groups: in.Groups}
	if in.Extra != nil {
		out.Extra = make(map[string]authorizationv1beta1.ExtraValue, len(in.Extra))
		for k, v := range in.Extra {
			out.Extra[k] = authorizationv1beta1.ExtraValue(v)
		}
	}
	if ra := in.ResourceAttributes; ra != nil {
		out.ResourceAttributes = &authorizationv1beta1.ResourceAttributes{
			Namespace: ra.Namespace, Verb: ra.Verb, Group: ra.Group, Version: ra.Version, Resource: ra.Resource,
			Subresource: ra.Subresource, Name: ra.Name, FieldSelector: ra.FieldSelector, LabelSelector: ra.LabelSelector,
		}
	}
	if nra := in.NonResourceAttributes; nra != nil {
		out.NonResourceAttributes = &authorizationv1beta1.NonResourceAttributes{Path: nra.Path, Verb: nra.Verb}
	}
	return out
}
