package access

import (
	"errors"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/authz/node"
)

// ruleResolver lists a user's rules for SelfSubjectRulesReview, as
// kube-apiserver's rule resolvers: all of them under AlwaysAllow, the
// RBAC rules under RBAC, in mode order. Under Webhook the list is
// incomplete: the webhook can only answer single requests; so is a
// node's under Node, whose permissions follow its pods.
type ruleResolver struct {
	modes []string
	rbac  *authz.RBAC
	node  *node.Authorizer // nil unless a mode is Node
}

var everything = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func (r ruleResolver) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	modes := r.modes
	if len(modes) == 0 {
		modes = []string{authz.ModeRBAC}
	}
	var rules []rbacv1.PolicyRule
	var errs []error
	incomplete := false
	for _, m := range modes {
		switch m {
		case authz.ModeWebhook:
			incomplete = true
			errs = append(errs, errWebhookRules)
		case authz.ModeNode:
			if r.node != nil && r.node.IsNode(u) {
				incomplete = true
				errs = append(errs, node.ErrNoRules)
			}
		case authz.ModeAlwaysAllow:
			rules = append(rules, everything...)
		case authz.ModeRBAC:
			rs, err := r.rbac.RulesFor(u, namespace)
			rules = append(rules, rs...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return rules, incomplete, errors.Join(errs...)
}

// errWebhookRules is upstream's webhook RulesFor error, shown in the
// review's evaluationError.
var errWebhookRules = errors.New("webhook authorizer does not support user rule resolution")
