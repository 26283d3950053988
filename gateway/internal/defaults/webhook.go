package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Webhook defaults of admissionregistration.k8s.io/v1.
const (
	webhookTimeoutSeconds int32 = 10
	webhookServicePort    int32 = 443
)

// validatingWebhook sets failurePolicy Fail, matchPolicy Equivalent, empty
// (match everything) namespace and object selectors, a 10s timeout, the
// scope "*" of every rule and the port 443 of a service reference.
// sideEffects and admissionReviewVersions are required, not defaulted.
func validatingWebhook(w *admissionregistrationv1.ValidatingWebhook) {
	webhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds)
	webhookTargets(&w.ClientConfig, w.Rules)
}

// mutatingWebhook sets what validatingWebhook sets and reinvocationPolicy
// Never.
func mutatingWebhook(w *admissionregistrationv1.MutatingWebhook) {
	webhook(&w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds)
	if w.ReinvocationPolicy == nil {
		w.ReinvocationPolicy = new(admissionregistrationv1.NeverReinvocationPolicy)
	}
	webhookTargets(&w.ClientConfig, w.Rules)
}

func webhook(failure **admissionregistrationv1.FailurePolicyType, match **admissionregistrationv1.MatchPolicyType,
	nsSel, objSel **metav1.LabelSelector, timeout **int32) {
	if *failure == nil {
		*failure = new(admissionregistrationv1.Fail)
	}
	if *match == nil {
		*match = new(admissionregistrationv1.Equivalent)
	}
	if *nsSel == nil {
		*nsSel = &metav1.LabelSelector{}
	}
	if *objSel == nil {
		*objSel = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = new(webhookTimeoutSeconds)
	}
}

func webhookTargets(cc *admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations) {
	if s := cc.Service; s != nil && s.Port == nil {
		s.Port = new(webhookServicePort)
	}
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = new(admissionregistrationv1.AllScopes)
		}
	}
}
