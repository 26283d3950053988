package chain

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kgate/kgate/gateway/internal/authz"
)

// celAuthorizer answers the authorizer checks of admission CEL
// expressions (webhook matchConditions, policies) with the gateway's
// authorizer chain.
type celAuthorizer struct{ a authz.Authorizer }

// Authorize implements authorizer.UnconditionalAuthorizer.
func (c celAuthorizer) Authorize(_ context.Context, at authorizer.Attributes) (authorizer.Decision, string, error) {
	// Evaluate, not Authorize: an authorizer that could not decide (the
	// webhook down) is CEL's errored(), as in kube-apiserver.
	d, reason, err := authz.Evaluate(c.a, authz.Attributes{
		User: at.GetUser(), Verb: at.GetVerb(), Namespace: at.GetNamespace(), APIGroup: at.GetAPIGroup(),
		APIVersion: at.GetAPIVersion(), Resource: at.GetResource(), Subresource: at.GetSubresource(),
		Name: at.GetName(), Path: at.GetPath(), IsResourceRequest: at.IsResourceRequest(),
	})
	switch d {
	case authz.Allow:
		return authorizer.DecisionAllow, reason, nil
	case authz.Deny:
		return authorizer.DecisionDeny, reason, nil
	}
	return authorizer.DecisionNoOpinion, reason, err
}
