package review

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/apierror"
)

// selfSubjectRulesReview lists what the requester may do in a namespace
// (kubectl auth can-i --list), as upstream: resource rules, non-resource
// rules, and whether the list may be incomplete.
func (h *Handler) selfSubjectRulesReview(_ context.Context, c *call, obj runtime.Object) (runtime.Object, error) {
	r := obj.(*authorizationv1.SelfSubjectRulesReview)
	if r.Spec.Namespace == "" {
		return nil, apierror.BadRequest("no namespace on request")
	}
	rules, incomplete, err := h.cfg.Rules.RulesFor(c.user, r.Spec.Namespace)
	out := &authorizationv1.SelfSubjectRulesReview{Status: authorizationv1.SubjectRulesReviewStatus{
		ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}, Incomplete: incomplete,
	}}
	for _, p := range rules {
		if len(p.Resources) > 0 {
			out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{
				Verbs: p.Verbs, APIGroups: p.APIGroups, Resources: p.Resources, ResourceNames: p.ResourceNames,
			})
		}
		if len(p.NonResourceURLs) > 0 {
			out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{
				Verbs: p.Verbs, NonResourceURLs: p.NonResourceURLs,
			})
		}
	}
	if err != nil {
		out.Status.EvaluationError = err.Error()
	}
	return out, nil
}
