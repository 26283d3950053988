package rest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"

	"github.com/kgate/kgate/storage/portalloc"
)

// fakePorts hands out 30000, 30001, ... of 30000-30099 and records
// what is held.
type fakePorts struct {
	mu   sync.Mutex
	next int
	held map[int]bool
}

func (f *fakePorts) Allocate(_ context.Context, port int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if port < 30000 || port > 30099 {
		pr, _ := utilnet.ParsePortRange("30000-30099")
		return fmt.Errorf("cannot allocate: %w: %w", portalloc.ErrNotInRange, &portallocator.ErrNotInRange{ValidPorts: pr.String()})
	}
	if f.held[port] {
		return fmt.Errorf("cannot allocate: %w", portalloc.ErrAllocated)
	}
	f.held[port] = true
	return nil
}

func (f *fakePorts) AllocateNext(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ; f.next < 100; f.next++ {
		if p := 30000 + f.next; !f.held[p] {
			f.held[p] = true
			return p, nil
		}
	}
	return 0, portalloc.ErrFull
}

func (f *fakePorts) Release(_ context.Context, ports ...int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range ports {
		delete(f.held, p)
	}
	return nil
}

func (f *fakePorts) holds(p int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[p]
}

func TestServiceNodePorts(t *testing.T) {
	svc := func(name, typ, ports string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":%q},"spec":{"type":%q,"selector":{"app":"a"},"ports":[%s]}}`, name, typ, ports)
	}
	np := &fakePorts{held: map[int]bool{}}
	e := newEnv(t, func(c *Config) { c.ServiceIPs = &fakeIPs{held: map[string]string{}}; c.NodePorts = np })

	var got corev1.Service
	r := e.do("POST", "/api/v1/namespaces/ns/services", svc("a", "NodePort",
		`{"name":"dns-tcp","port":53,"protocol":"TCP"},{"name":"dns-udp","port":53,"protocol":"UDP"},{"name":"web","port":80,"nodePort":30050}`))
	r.decode(t, &got)
	if p := got.Spec.Ports; len(p) != 3 || p[0].NodePort == 0 || p[0].NodePort != p[1].NodePort || p[2].NodePort != 30050 ||
		!np.holds(int(p[0].NodePort)) || !np.holds(30050) {
		t.Errorf("ports %+v, held %v", got.Spec.Ports, np.held)
	}
	first := int(got.Spec.Ports[0].NodePort)

	// A port that is taken, or out of range: upstream's 422.
	for _, tc := range []struct{ port, msg string }{
		{"30050", "spec.ports[0].nodePort: Invalid value: 30050: provided port is already allocated"},
		{"40000", "provided port is not in the valid range. The range of valid ports is 30000-30099"},
	} {
		r := e.do("POST", "/api/v1/namespaces/ns/services", svc("b", "NodePort", `{"port":80,"nodePort":`+tc.port+`}`))
		if r.code != 422 || r.status == nil || !strings.Contains(r.status.Message, tc.msg) {
			t.Errorf("nodePort %s: %d %+v, want 422 with %q", tc.port, r.code, r.status, tc.msg)
		}
	}
	// A failed create gives back what it took: the first port was given,
	// the second refused.
	before := len(np.held)
	if r := e.do("POST", "/api/v1/namespaces/ns/services", svc("c", "NodePort", `{"name":"x","port":81},{"name":"y","port":82,"nodePort":30050}`)); r.code != 422 {
		t.Errorf("conflicting second port: %d", r.code)
	}
	if len(np.held) != before {
		t.Errorf("a refused create kept ports: %v", np.held)
	}
	// ClusterIP Services and LoadBalancers that opt out get none.
	lb := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb"},"spec":{"type":"LoadBalancer","allocateLoadBalancerNodePorts":false,"selector":{"app":"a"},"ports":[{"port":80}]}}`)
	for _, b := range [][]byte{svc("d", "ClusterIP", `{"port":80}`), lb} {
		got = corev1.Service{}
		e.do("POST", "/api/v1/namespaces/ns/services", b).decode(t, &got)
		if got.Spec.Ports[0].NodePort != 0 {
			t.Errorf("%s got node port %d", got.Name, got.Spec.Ports[0].NodePort)
		}
	}
	// An update that leaves node ports out keeps them.
	got = corev1.Service{}
	e.do("PUT", "/api/v1/namespaces/ns/services/a", svc("a", "NodePort",
		`{"name":"dns-tcp","port":53,"protocol":"TCP"},{"name":"dns-udp","port":53,"protocol":"UDP"},{"name":"web","port":80}`)).decode(t, &got)
	if p := got.Spec.Ports; len(p) != 3 || int(p[0].NodePort) != first || p[2].NodePort != 30050 {
		t.Errorf("update dropped node ports: %+v", p)
	}
	// Deleting gives them back.
	if r := e.do("DELETE", "/api/v1/namespaces/ns/services/a", nil); r.code != 200 {
		t.Fatalf("delete: %d", r.code)
	}
	if np.holds(first) || np.holds(30050) {
		t.Errorf("deleted service's node ports still held: %v", np.held)
	}
}

// TestServiceUpdateAllocations: an update takes what the new spec needs
// and the old one did not hold, and gives back what it no longer needs
// once stored, as upstream's service REST does on update: node ports when
// a Service becomes a NodePort or gains a port, a health check node port
// for a Local LoadBalancer, a cluster IP when it stops being an
// ExternalName; a refused update keeps nothing.
func TestServiceUpdateAllocations(t *testing.T) {
	svc := func(typ, extra, ports string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"u"},"spec":{"type":%q,"selector":{"app":"a"}%s,"ports":[%s]}}`, typ, extra, ports)
	}
	np := &fakePorts{held: map[int]bool{}}
	ips := &fakeIPs{held: map[string]string{}}
	e := newEnv(t, func(c *Config) { c.ServiceIPs = ips; c.NodePorts = np })
	put := func(body []byte) corev1.Service {
		t.Helper()
		var got corev1.Service
		r := e.do("PUT", "/api/v1/namespaces/ns/services/u", body)
		if r.code != 200 {
			t.Fatalf("update: %d %+v", r.code, r.status)
		}
		r.decode(t, &got)
		return got
	}
	const web = `{"name":"web","port":80}`
	var got corev1.Service
	e.do("POST", "/api/v1/namespaces/ns/services", svc("ClusterIP", "", web)).decode(t, &got)
	ip := got.Spec.ClusterIP
	if ip == "" || len(np.held) != 0 {
		t.Fatalf("created %q, node ports %v", ip, np.held)
	}

	got = put(svc("NodePort", "", web))
	first := int(got.Spec.Ports[0].NodePort)
	if first == 0 || !np.holds(first) || got.Spec.ClusterIP != ip {
		t.Errorf("to NodePort: node port %d (held %v), cluster IP %q", first, np.held, got.Spec.ClusterIP)
	}
	got = put(svc("NodePort", "", web+`,{"name":"tls","port":443}`))
	second := int(got.Spec.Ports[1].NodePort)
	if int(got.Spec.Ports[0].NodePort) != first || second == 0 || second == first || !np.holds(second) {
		t.Errorf("a port added: node ports %d %d, held %v", got.Spec.Ports[0].NodePort, second, np.held)
	}

	// A node port another Service holds: 422, and the update keeps nothing.
	if err := np.Allocate(context.Background(), 30090); err != nil {
		t.Fatal(err)
	}
	before := len(np.held)
	r := e.do("PUT", "/api/v1/namespaces/ns/services/u", svc("NodePort", "", web+`,{"name":"tls","port":443},{"name":"x","port":8080},{"name":"y","port":8081,"nodePort":30090}`))
	if r.code != 422 || r.status == nil || !strings.Contains(r.status.Message, "spec.ports[3].nodePort: Invalid value: 30090: provided port is already allocated") {
		t.Errorf("taken node port: %d %+v", r.code, r.status)
	}
	if len(np.held) != before {
		t.Errorf("a refused update kept node ports: %v", np.held)
	}

	got = put(svc("LoadBalancer", `,"externalTrafficPolicy":"Local"`, web+`,{"name":"tls","port":443}`))
	hc := int(got.Spec.HealthCheckNodePort)
	if hc == 0 || !np.holds(hc) || int(got.Spec.Ports[0].NodePort) != first {
		t.Errorf("to a Local LoadBalancer: health check node port %d, ports %+v, held %v", hc, got.Spec.Ports, np.held)
	}

	// Back to ClusterIP: every node port is given back.
	got = put(svc("ClusterIP", "", web))
	if got.Spec.Ports[0].NodePort != 0 || got.Spec.HealthCheckNodePort != 0 || np.holds(first) || np.holds(second) || np.holds(hc) {
		t.Errorf("to ClusterIP: ports %+v, held %v", got.Spec.Ports, np.held)
	}

	// An ExternalName gives its cluster IP back; leaving it takes one.
	got = put(svc("ExternalName", `,"externalName":"example.com"`, web))
	if got.Spec.ClusterIP != "" || ips.held[ip] != "" {
		t.Errorf("to ExternalName: cluster IP %q, held %v", got.Spec.ClusterIP, ips.held)
	}
	got = put(svc("ClusterIP", "", web))
	if got.Spec.ClusterIP == "" || ips.held[got.Spec.ClusterIP] != "ns/u" {
		t.Errorf("from ExternalName: cluster IP %q, held %v", got.Spec.ClusterIP, ips.held)
	}
}

// TestServiceLocalLoadBalancer: a LoadBalancer with traffic policy Local
// is created with a health check node port taken before validation (which
// requires one), as upstream's BeginCreate takes it; a dry run keeps none.
func TestServiceLocalLoadBalancer(t *testing.T) {
	np := &fakePorts{held: map[int]bool{}}
	e := newEnv(t, func(c *Config) { c.ServiceIPs = &fakeIPs{held: map[string]string{}}; c.NodePorts = np })
	body := []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb"},"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","selector":{"app":"a"},"ports":[{"port":80}]}}`)
	r := e.do("POST", "/api/v1/namespaces/ns/services?dryRun=All", body)
	if r.code != 201 || len(np.held) != 0 {
		t.Fatalf("dry run: %d %+v, held %v", r.code, r.status, np.held)
	}
	var got corev1.Service
	r = e.do("POST", "/api/v1/namespaces/ns/services", body)
	if r.code != 201 {
		t.Fatalf("create: %d %+v", r.code, r.status)
	}
	r.decode(t, &got)
	hc, port := int(got.Spec.HealthCheckNodePort), int(got.Spec.Ports[0].NodePort)
	if hc == 0 || port == 0 || hc == port || !np.holds(hc) || !np.holds(port) {
		t.Errorf("health check node port %d, node port %d, held %v", hc, port, np.held)
	}
}
