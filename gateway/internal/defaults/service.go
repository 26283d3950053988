package defaults

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultIPFamily is the IP family Apply gives a Service whose cluster IPs
// do not tell it: kgate's service CIDR is single-stack IPv4 by default.
const DefaultIPFamily = corev1.IPv4Protocol

// service applies SetDefaults_Service and the IP family fields kube-apiserver
// sets before it allocates cluster IPs.
func service(svc *corev1.Service) {
	s := &svc.Spec
	if s.SessionAffinity == "" {
		s.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch s.SessionAffinity {
	case corev1.ServiceAffinityNone:
		s.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := s.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	if s.Type == "" {
		s.Type = corev1.ServiceTypeClusterIP
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	externallyAccessible := s.Type == corev1.ServiceTypeLoadBalancer || s.Type == corev1.ServiceTypeNodePort ||
		s.Type == corev1.ServiceTypeClusterIP && len(s.ExternalIPs) > 0
	if externallyAccessible && s.ExternalTrafficPolicy == "" {
		s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if s.InternalTrafficPolicy == nil && (s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer || s.Type == corev1.ServiceTypeClusterIP) {
		s.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if s.Type == corev1.ServiceTypeLoadBalancer {
		if s.AllocateLoadBalancerNodePorts == nil {
			s.AllocateLoadBalancerNodePorts = new(true)
		}
		for i := range svc.Status.LoadBalancer.Ingress {
			ing := &svc.Status.LoadBalancer.Ingress[i]
			if ing.IP != "" && ing.IPMode == nil {
				ing.IPMode = new(corev1.LoadBalancerIPModeVIP)
			}
		}
	}
	ServiceIPFamilies(svc, DefaultIPFamily)
}

// ServiceIPFamilies sets the IP family fields of a Service the way
// kube-apiserver does on a single-stack cluster whose service CIDR is of
// family: spec.clusterIPs from a lone spec.clusterIP, spec.ipFamilyPolicy
// (SingleStack; RequireDualStack for a headless Service without selector),
// and spec.ipFamilies from the cluster IPs, else family. Fields already set
// are kept, ExternalName Services are left alone. Apply calls it with
// DefaultIPFamily; call it before Apply for an IPv6 service CIDR.
func ServiceIPFamilies(svc *corev1.Service, family corev1.IPFamily) {
	s := &svc.Spec
	if s.Type == corev1.ServiceTypeExternalName {
		return
	}
	if s.ClusterIP != "" && len(s.ClusterIPs) == 0 {
		s.ClusterIPs = []string{s.ClusterIP}
	}
	headlessNoSelector := s.ClusterIP == corev1.ClusterIPNone && len(s.Selector) == 0
	if s.IPFamilyPolicy == nil {
		if headlessNoSelector {
			s.IPFamilyPolicy = new(corev1.IPFamilyPolicyRequireDualStack)
		} else {
			s.IPFamilyPolicy = new(corev1.IPFamilyPolicySingleStack)
		}
	}
	for i, ip := range s.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(s.IPFamilies) {
			continue
		}
		f, ok := familyOf(ip)
		if !ok {
			break
		}
		s.IPFamilies = append(s.IPFamilies, f)
	}
	if len(s.IPFamilies) == 0 {
		s.IPFamilies = []corev1.IPFamily{family}
	}
	if headlessNoSelector && len(s.IPFamilies) == 1 && *s.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		s.IPFamilies = append(s.IPFamilies, otherFamily(s.IPFamilies[0]))
	}
}

func familyOf(ip string) (corev1.IPFamily, bool) {
	a, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return "", false
	case a.Is4() || a.Is4In6():
		return corev1.IPv4Protocol, true
	default:
		return corev1.IPv6Protocol, true
	}
}

func otherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

func endpoints(e *corev1.Endpoints) {
	for i := range e.Subsets {
		ports := e.Subsets[i].Ports
		for j := range ports {
			if ports[j].Protocol == "" {
				ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

func endpointSlice(e *discoveryv1.EndpointSlice) {
	for i := range e.Ports {
		p := &e.Ports[i]
		if p.Name == nil {
			p.Name = new("")
		}
		if p.Protocol == nil {
			p.Protocol = new(corev1.ProtocolTCP)
		}
	}
}
