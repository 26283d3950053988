package webhook

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/gateway/internal/admission"
)

// hook is what matching and calling need of a mutating or validating
// webhook.
type hook struct {
	config             string // the configuration's name
	name               string
	clientConfig       admissionregistrationv1.WebhookClientConfig
	rules              []admissionregistrationv1.RuleWithOperations
	failurePolicy      admissionregistrationv1.FailurePolicyType
	namespaceSelector  *metav1.LabelSelector
	objectSelector     *metav1.LabelSelector
	sideEffects        admissionregistrationv1.SideEffectClass
	timeoutSeconds     int32
	reinvocationPolicy admissionregistrationv1.ReinvocationPolicyType
}

// selects says whether h's rules and selectors select a.
func (p *Plugin) selects(ctx context.Context, h *hook, a *admission.Attributes) (bool, error) {
	matched := false
	for _, r := range h.rules {
		if admission.MatchesRule(r, a) {
			matched = true
			break
		}
	}
	if !matched {
		return false, nil
	}
	if ok, err := admission.ObjectSelected(h.objectSelector, a); err != nil || !ok {
		return false, err
	}
	return admission.NamespaceSelected(ctx, p.cfg.Namespaces, h.namespaceSelector, a)
}
