package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kgate/kgate/storage/storagetest"
)

// testControlPlaneObjects: the objects kube-apiserver keeps inside
// itself, through kubectl: the kubernetes Service on the first service
// IP with its Endpoints and EndpointSlice naming the gateway (loopback
// and its port), the gateway's identity Lease, the
// extension-apiserver-authentication ConfigMap with the client CA, the
// system priority classes and the APF bootstrap objects; and a NodePort
// Service gets a port, and the same port asked for again is refused with
// upstream's message.
func testControlPlaneObjects(t *testing.T, e *env) {
	port := e.srv.addr[strings.LastIndex(e.srv.addr, ":")+1:]
	var svc corev1.Service
	storagetest.Eventually(t, 30*time.Second, "the kubernetes service", func() error {
		if r := e.k.run("get", "service", "kubernetes", "-n", "default", "-o", "json"); r.err != nil {
			return r.err
		}
		return nil
	})
	e.k.json(t, &svc, "get", "service", "kubernetes", "-n", "default")
	if svc.Spec.ClusterIP != "10.96.0.1" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != port {
		t.Errorf("kubernetes service %+v, want 10.96.0.1:443 -> %s", svc.Spec, port)
	}
	storagetest.Eventually(t, 30*time.Second, "the kubernetes endpointslice", func() error {
		var s discoveryv1.EndpointSlice
		if r := e.k.run("get", "endpointslice", "kubernetes", "-n", "default", "-o", "json"); r.err != nil {
			return r.err
		}
		e.k.json(t, &s, "get", "endpointslice", "kubernetes", "-n", "default")
		if len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != "127.0.0.1" || len(s.Ports) != 1 || fmt.Sprint(*s.Ports[0].Port) != port {
			return fmt.Errorf("endpointslice %+v %+v", s.Endpoints, s.Ports)
		}
		return nil
	})
	var ep corev1.Endpoints
	e.k.json(t, &ep, "get", "endpoints", "kubernetes", "-n", "default")
	if len(ep.Subsets) != 1 || ep.Subsets[0].Addresses[0].IP != "127.0.0.1" {
		t.Errorf("endpoints %+v", ep.Subsets)
	}

	var leases coordinationv1.LeaseList
	e.k.json(t, &leases, "get", "leases", "-n", "kube-system", "-l", "apiserver.kubernetes.io/identity=kube-apiserver")
	if len(leases.Items) != 1 || !strings.HasPrefix(leases.Items[0].Name, "apiserver-") {
		t.Errorf("identity leases %+v", leases.Items)
	}

	storagetest.Eventually(t, 30*time.Second, "the extension-apiserver-authentication configmap", func() error {
		r := e.k.run("get", "configmap", "extension-apiserver-authentication", "-n", "kube-system", "-o", "jsonpath={.data.client-ca-file}")
		if r.err != nil {
			return r.err
		}
		if !strings.Contains(r.stdout, "BEGIN CERTIFICATE") {
			return errors.New("no client-ca-file")
		}
		return nil
	})
	e.k.ok(t, "get", "priorityclass", "system-node-critical", "system-cluster-critical")
	storagetest.Eventually(t, 30*time.Second, "the APF bootstrap objects", func() error {
		return e.k.run("get", "flowschema", "exempt", "catch-all", "global-default").err
	})

	e.k.ok(t, "create", "service", "nodeport", "np-e2e", "-n", ns, "--tcp", "80:8080")
	var np corev1.Service
	e.k.json(t, &np, "get", "service", "np-e2e", "-n", ns)
	got := np.Spec.Ports[0].NodePort
	if got < 30000 || got > 32767 {
		t.Fatalf("node port %d, want one of 30000-32767", got)
	}
	r := e.k.run("create", "service", "nodeport", "np-e2e-2", "-n", ns, "--tcp", "80:8080", "--node-port", fmt.Sprint(got))
	if r.err == nil || !strings.Contains(r.stderr, "provided port is already allocated") {
		t.Errorf("a taken node port: %s", r)
	}
	e.k.ok(t, "delete", "service", "np-e2e", "-n", ns)
}
