package defaults

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func TestNetworkPolicy(t *testing.T) {
	runCases(t, &networkingv1.NetworkPolicy{}, []applyCase{{
		name: "ingress only",
		in:   `{"spec":{"podSelector":{},"ingress":[{"ports":[{"port":80},{"port":53,"protocol":"UDP"}]}]}}`,
		want: `{"spec":{"podSelector":{},"ingress":[{"ports":[{"port":80,"protocol":"TCP"},{"port":53,"protocol":"UDP"}]}],"policyTypes":["Ingress"]}}`,
	}, {
		name: "egress",
		in:   `{"spec":{"podSelector":{},"egress":[{"ports":[{"port":443}]}]}}`,
		want: `{"spec":{"podSelector":{},"egress":[{"ports":[{"port":443,"protocol":"TCP"}]}],"policyTypes":["Ingress","Egress"]}}`,
	}, {
		name: "types kept",
		in:   `{"spec":{"podSelector":{},"policyTypes":["Egress"]}}`,
		want: `{"spec":{"podSelector":{},"policyTypes":["Egress"]}}`,
	}})
}

func TestIngressClass(t *testing.T) {
	runCases(t, &networkingv1.IngressClass{}, []applyCase{{
		name: "parameters scope",
		in:   `{"spec":{"controller":"example.com/c","parameters":{"kind":"K","name":"n"}}}`,
		want: `{"spec":{"controller":"example.com/c","parameters":{"kind":"K","name":"n","scope":"Cluster"}}}`,
	}, {
		name: "no parameters",
		in:   `{"spec":{"controller":"example.com/c"}}`,
		want: `{"spec":{"controller":"example.com/c"}}`,
	}})
}

func TestRoleBindings(t *testing.T) {
	const in = `{"roleRef":{"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"u"},{"kind":"Group","name":"g"},
		{"kind":"ServiceAccount","name":"sa","namespace":"ns"}]}`
	const want = `{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},
		"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"u"},{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"g"},
		{"kind":"ServiceAccount","name":"sa","namespace":"ns"}]}`
	runCases(t, &rbacv1.RoleBinding{}, []applyCase{{name: "role binding", in: in, want: want}})
	runCases(t, &rbacv1.ClusterRoleBinding{}, []applyCase{{name: "cluster role binding", in: in, want: want}})
}

func TestPriorityClass(t *testing.T) {
	runCases(t, &schedulingv1.PriorityClass{}, []applyCase{
		{name: "default", in: `{"value":1000}`, want: `{"value":1000,"preemptionPolicy":"PreemptLowerPriority"}`},
		{name: "kept", in: `{"value":1000,"preemptionPolicy":"Never"}`, want: `{"value":1000,"preemptionPolicy":"Never"}`},
	})
}

func TestStorageClass(t *testing.T) {
	runCases(t, &storagev1.StorageClass{}, []applyCase{{
		name: "minimal",
		in:   `{"provisioner":"example.com/p"}`,
		want: `{"provisioner":"example.com/p","reclaimPolicy":"Delete","volumeBindingMode":"Immediate"}`,
	}})
}

func TestHorizontalPodAutoscaler(t *testing.T) {
	const target = `"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"d"},"maxReplicas":5`
	runCases(t, &autoscalingv2.HorizontalPodAutoscaler{}, []applyCase{{
		name: "minimal",
		in:   `{"spec":{` + target + `}}`,
		want: `{"spec":{` + target + `,"minReplicas":1,
			"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}]}}`,
	}, {
		name: "partial behavior",
		in: `{"spec":{` + target + `,"minReplicas":2,"metrics":[{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"1Gi"}}}],
			"behavior":{"scaleDown":{"stabilizationWindowSeconds":60}}}}`,
		want: `{"spec":{` + target + `,"minReplicas":2,"metrics":[{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"1Gi"}}}],
			"behavior":{
				"scaleUp":{"stabilizationWindowSeconds":0,"selectPolicy":"Max","policies":[{"type":"Pods","value":4,"periodSeconds":15},{"type":"Percent","value":100,"periodSeconds":15}]},
				"scaleDown":{"stabilizationWindowSeconds":60,"selectPolicy":"Max","policies":[{"type":"Percent","value":100,"periodSeconds":15}]}}}}`,
	}})
}

func TestWebhookConfigurations(t *testing.T) {
	runCases(t, &admissionregistrationv1.ValidatingWebhookConfiguration{}, []applyCase{{
		name: "validating",
		in: `{"webhooks":[{"name":"v.example.com","sideEffects":"None","admissionReviewVersions":["v1"],
			"clientConfig":{"service":{"namespace":"ns","name":"svc"}},
			"rules":[{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}]}]}`,
		want: `{"webhooks":[{"name":"v.example.com","sideEffects":"None","admissionReviewVersions":["v1"],
			"clientConfig":{"service":{"namespace":"ns","name":"svc","port":443}},
			"rules":[{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"],"scope":"*"}],
			"failurePolicy":"Fail","matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},"timeoutSeconds":10}]}`,
	}})
	runCases(t, &admissionregistrationv1.MutatingWebhookConfiguration{}, []applyCase{{
		name: "mutating",
		in: `{"webhooks":[{"name":"m.example.com","sideEffects":"None","admissionReviewVersions":["v1"],
			"clientConfig":{"url":"https://example.com/m"},"failurePolicy":"Ignore","timeoutSeconds":3,
			"rules":[{"operations":["*"],"apiGroups":["apps"],"apiVersions":["v1"],"resources":["deployments"],"scope":"Namespaced"}]}]}`,
		want: `{"webhooks":[{"name":"m.example.com","sideEffects":"None","admissionReviewVersions":["v1"],
			"clientConfig":{"url":"https://example.com/m"},
			"rules":[{"operations":["*"],"apiGroups":["apps"],"apiVersions":["v1"],"resources":["deployments"],"scope":"Namespaced"}],
			"failurePolicy":"Ignore","matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},"timeoutSeconds":3,
			"reinvocationPolicy":"Never"}]}`,
	}})
}
