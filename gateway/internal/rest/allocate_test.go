package rest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/ipalloc"
)

// fakeIPs hands out 10.0.0.N and records what happens.
type fakeIPs struct {
	mu       sync.Mutex
	next     int
	held     map[string]string // ip → ns/name
	released []string
}

func (f *fakeIPs) Allocate(_ context.Context, ns, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	ip := fmt.Sprintf("10.0.0.%d", f.next)
	f.held[ip] = ns + "/" + name
	return ip, nil
}

func (f *fakeIPs) AllocateSpecific(_ context.Context, ip, ns, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ip == "192.168.0.1" {
		return fmt.Errorf("cannot allocate: %w", ipalloc.ErrNotInRange)
	}
	if _, ok := f.held[ip]; ok {
		return fmt.Errorf("cannot allocate: %w", ipalloc.ErrAllocated)
	}
	f.held[ip] = ns + "/" + name
	return nil
}

func (f *fakeIPs) Release(_ context.Context, ip string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, ip)
	f.released = append(f.released, ip)
	return nil
}

var servicesGVR = corev1.SchemeGroupVersion.WithResource("services")

func TestServiceClusterIPs(t *testing.T) {
	svc := func(name, typ, ip string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":%q},"spec":{"type":%q,"clusterIP":%q,"ports":[{"port":80}]%s}}`,
			name, typ, ip, map[bool]string{true: `,"externalName":"example.com"`}[typ == "ExternalName"])
	}
	ips := &fakeIPs{held: map[string]string{}}
	e := newEnv(t, func(c *Config) { c.ServiceIPs = ips })

	var got corev1.Service
	e.do("POST", "/api/v1/namespaces/ns/services", svc("a", "ClusterIP", "")).decode(t, &got)
	if got.Spec.ClusterIP != "10.0.0.1" || !slices.Equal(got.Spec.ClusterIPs, []string{"10.0.0.1"}) || ips.held["10.0.0.1"] != "ns/a" {
		t.Errorf("allocated %q %v, held %v", got.Spec.ClusterIP, got.Spec.ClusterIPs, ips.held)
	}
	got = corev1.Service{}
	e.do("POST", "/api/v1/namespaces/ns/services", svc("b", "ClusterIP", "10.0.0.50")).decode(t, &got)
	if got.Spec.ClusterIP != "10.0.0.50" || ips.held["10.0.0.50"] != "ns/b" {
		t.Errorf("specific IP %q, held %v", got.Spec.ClusterIP, ips.held)
	}
	for _, tc := range []struct {
		name, typ, ip string
		code          int
	}{
		{"c", "ClusterIP", "10.0.0.50", 422},   // taken
		{"d", "ClusterIP", "192.168.0.1", 422}, // outside the range
	} {
		if r := e.do("POST", "/api/v1/namespaces/ns/services", svc(tc.name, tc.typ, tc.ip)); r.code != tc.code {
			t.Errorf("%s with %s: %d, want %d", tc.name, tc.ip, r.code, tc.code)
		}
	}
	// Nothing to allocate for headless and ExternalName services.
	before := len(ips.held)
	for _, b := range [][]byte{svc("h", "ClusterIP", "None"), svc("x", "ExternalName", "")} {
		if r := e.do("POST", "/api/v1/namespaces/ns/services", b); r.code != 201 {
			t.Errorf("%s: %d %+v", b, r.code, r.status)
		}
	}
	if len(ips.held) != before {
		t.Errorf("allocated for headless or ExternalName: %v", ips.held)
	}

	// A create that fails in storage gives its IP back.
	e.store.createErr = fmt.Errorf("cannot create: %w", storage.ErrUnavailable)
	if r := e.do("POST", "/api/v1/namespaces/ns/services", svc("e", "ClusterIP", "")); r.code != 503 {
		t.Errorf("failed create: %d", r.code)
	}
	e.store.createErr = nil
	if !slices.Contains(ips.released, "10.0.0.2") {
		t.Errorf("the failed create's IP was not released: %v", ips.released)
	}

	// An update without a cluster IP keeps the allocated one.
	got = corev1.Service{}
	e.do("PUT", "/api/v1/namespaces/ns/services/a", svc("a", "ClusterIP", "")).decode(t, &got)
	if got.Spec.ClusterIP != "10.0.0.1" {
		t.Errorf("update changed the cluster IP to %q", got.Spec.ClusterIP)
	}

	// Deleting gives it back.
	if r := e.do("DELETE", "/api/v1/namespaces/ns/services/a", nil); r.code != 200 {
		t.Fatalf("delete: %d", r.code)
	}
	if _, held := ips.held["10.0.0.1"]; held {
		t.Errorf("deleted service's IP still held: %v", ips.held)
	}
}

func TestBinding(t *testing.T) {
	binding := func(name, node string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Binding","metadata":{"name":%q},"target":{"kind":"Node","name":%q}}`, name, node)
	}
	for _, tc := range []struct {
		name     string
		uri      string
		body     []byte
		assigned string
		wantCode int
		wantNode string
	}{
		{"pods/binding", "/api/v1/namespaces/ns/pods/p/binding", binding("p", "n1"), "", 201, "n1"},
		{"bindings resource", "/api/v1/namespaces/ns/bindings", binding("p", "n1"), "", 201, "n1"},
		{"already assigned", "/api/v1/namespaces/ns/pods/p/binding", binding("p", "n2"), "n1", 409, "n1"},
		{"no target", "/api/v1/namespaces/ns/pods/p/binding", binding("p", ""), "", 422, ""},
		{"name mismatch", "/api/v1/namespaces/ns/pods/p/binding", binding("q", "n1"), "", 400, ""},
		{"dry run", "/api/v1/namespaces/ns/pods/p/binding?dryRun=All", binding("p", "n1"), "", 201, ""},
		{"missing pod", "/api/v1/namespaces/ns/pods/gone/binding", binding("gone", "n1"), "", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p := pod("ns", "p", nil)
			p.Spec.NodeName = tc.assigned
			e.seed(podsGVR, p)
			r := e.do("POST", tc.uri, tc.body)
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d (%+v)", r.code, tc.wantCode, r.status)
			}
			stored := e.stored(podsGVR, "ns", "p").(*corev1.Pod)
			if stored.Spec.NodeName != tc.wantNode {
				t.Errorf("node %q, want %q", stored.Spec.NodeName, tc.wantNode)
			}
			if r.code == 201 {
				var st metav1.Status
				r.decode(t, &st)
				if st.Kind != "Status" || st.Status != metav1.StatusSuccess {
					t.Errorf("answered %+v", st)
				}
				if tc.wantNode != "" && (len(stored.Status.Conditions) != 1 || stored.Status.Conditions[0].Type != corev1.PodScheduled) {
					t.Errorf("conditions %+v", stored.Status.Conditions)
				}
			}
		})
	}
}
