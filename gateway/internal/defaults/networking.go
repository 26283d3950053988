package defaults

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// networkPolicy sets the policy types, Ingress, plus Egress when the policy
// has egress rules, and the protocol of every port.
func networkPolicy(np *networkingv1.NetworkPolicy) {
	s := &np.Spec
	if len(s.PolicyTypes) == 0 {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(s.Egress) != 0 {
			s.PolicyTypes = append(s.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	for i := range s.Ingress {
		networkPolicyPorts(s.Ingress[i].Ports)
	}
	for i := range s.Egress {
		networkPolicyPorts(s.Egress[i].Ports)
	}
}

func networkPolicyPorts(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		if ports[i].Protocol == nil {
			ports[i].Protocol = new(corev1.ProtocolTCP)
		}
	}
}

func ingressClass(ic *networkingv1.IngressClass) {
	if p := ic.Spec.Parameters; p != nil && p.Scope == nil {
		p.Scope = new(networkingv1.IngressClassParametersReferenceScopeCluster)
	}
}
