package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kgate/kgate/gateway/internal/admission"
)

// BenchmarkMatchConditions matches a create against four webhooks whose
// matchConditions exclude it: the object is encoded for CEL once, not
// once per webhook.
func BenchmarkMatchConditions(b *testing.B) {
	u := "https://127.0.0.1:1/v"
	none := admissionregistrationv1.SideEffectClassNone
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v", ResourceVersion: "1"}}
	for i := range 4 {
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: fmt.Sprintf("v%d.test", i), ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u}, SideEffects: &none,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "never", Expression: "object.metadata.name == 'never'"}},
		})
	}
	p, err := New(Config{Validating: list{c}, Mutating: list{}, Namespaces: noLabels{}, Scheme: clientgoscheme.Scheme,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		a := &admission.Attributes{Resource: pods, Operation: admission.Create, Namespace: "ns", Name: "p", Object: pod}
		if err := p.Validating().Validate(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
}
