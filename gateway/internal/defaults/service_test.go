package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestService(t *testing.T) {
	runCases(t, &corev1.Service{}, []applyCase{{
		name: "cluster IP",
		in:   `{"spec":{"selector":{"app":"a"},"ports":[{"port":80},{"name":"dns","port":53,"protocol":"UDP","targetPort":"dns"}]}}`,
		want: `{"spec":{"selector":{"app":"a"},"type":"ClusterIP","sessionAffinity":"None",
			"ports":[{"port":80,"protocol":"TCP","targetPort":80},{"name":"dns","port":53,"protocol":"UDP","targetPort":"dns"}],
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}}`,
	}, {
		name: "cluster IP given",
		in:   `{"spec":{"clusterIP":"10.96.0.10","ports":[{"port":53,"targetPort":0}]}}`,
		want: `{"spec":{"clusterIP":"10.96.0.10","clusterIPs":["10.96.0.10"],"type":"ClusterIP","sessionAffinity":"None",
			"ports":[{"port":53,"protocol":"TCP","targetPort":53}],
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}}`,
	}, {
		name: "IPv6 cluster IP",
		in:   `{"spec":{"clusterIPs":["fd00::10"],"clusterIP":"fd00::10"}}`,
		want: `{"spec":{"clusterIP":"fd00::10","clusterIPs":["fd00::10"],"type":"ClusterIP","sessionAffinity":"None",
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv6"]}}`,
	}, {
		name: "external IPs",
		in:   `{"spec":{"externalIPs":["192.0.2.1"]}}`,
		want: `{"spec":{"externalIPs":["192.0.2.1"],"type":"ClusterIP","sessionAffinity":"None","externalTrafficPolicy":"Cluster",
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}}`,
	}, {
		name: "node port",
		in:   `{"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":30080}]}}`,
		want: `{"spec":{"type":"NodePort","sessionAffinity":"None","externalTrafficPolicy":"Cluster",
			"ports":[{"port":80,"protocol":"TCP","targetPort":80,"nodePort":30080}],
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}}`,
	}, {
		name: "load balancer",
		in: `{"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","ports":[{"port":443}]},
			"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"},{"hostname":"lb.example.com"}]}}}`,
		want: `{"spec":{"type":"LoadBalancer","sessionAffinity":"None","externalTrafficPolicy":"Local",
			"ports":[{"port":443,"protocol":"TCP","targetPort":443}],"allocateLoadBalancerNodePorts":true,
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]},
			"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.7","ipMode":"VIP"},{"hostname":"lb.example.com"}]}}}`,
	}, {
		name: "headless with selector",
		in:   `{"spec":{"clusterIP":"None","selector":{"app":"a"}}}`,
		want: `{"spec":{"clusterIP":"None","clusterIPs":["None"],"selector":{"app":"a"},"type":"ClusterIP","sessionAffinity":"None",
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}}`,
	}, {
		name: "headless without selector",
		in:   `{"spec":{"clusterIP":"None"}}`,
		want: `{"spec":{"clusterIP":"None","clusterIPs":["None"],"type":"ClusterIP","sessionAffinity":"None",
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"RequireDualStack","ipFamilies":["IPv4","IPv6"]}}`,
	}, {
		name: "client IP affinity",
		in:   `{"spec":{"sessionAffinity":"ClientIP","ipFamilyPolicy":"PreferDualStack"}}`,
		want: `{"spec":{"type":"ClusterIP","sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":10800}},
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"PreferDualStack","ipFamilies":["IPv4"]}}`,
	}, {
		name: "no affinity drops its config",
		in:   `{"spec":{"sessionAffinityConfig":{"clientIP":{"timeoutSeconds":60}}}}`,
		want: `{"spec":{"type":"ClusterIP","sessionAffinity":"None",
			"internalTrafficPolicy":"Cluster","ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"]}}`,
	}, {
		name: "external name",
		in:   `{"spec":{"type":"ExternalName","externalName":"example.com"}}`,
		want: `{"spec":{"type":"ExternalName","externalName":"example.com","sessionAffinity":"None"}}`,
	}})
}

func TestServiceIPFamilies(t *testing.T) {
	svc := &corev1.Service{}
	ServiceIPFamilies(svc, corev1.IPv6Protocol)
	Apply(svc)
	if got := svc.Spec.IPFamilies; len(got) != 1 || got[0] != corev1.IPv6Protocol {
		t.Errorf("ipFamilies = %v, want [IPv6]", got)
	}
}

func TestEndpoints(t *testing.T) {
	runCases(t, &corev1.Endpoints{}, []applyCase{{
		name: "ports",
		in:   `{"subsets":[{"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80},{"port":53,"protocol":"UDP"}]}]}`,
		want: `{"subsets":[{"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80,"protocol":"TCP"},{"port":53,"protocol":"UDP"}]}]}`,
	}})
}

func TestEndpointSlice(t *testing.T) {
	runCases(t, &discoveryv1.EndpointSlice{}, []applyCase{{
		name: "ports",
		in:   `{"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}],"ports":[{"port":80},{"name":"dns","port":53,"protocol":"UDP"}]}`,
		want: `{"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}],"ports":[{"name":"","port":80,"protocol":"TCP"},{"name":"dns","port":53,"protocol":"UDP"}]}`,
	}})
}
