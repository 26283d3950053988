package kubernetesservice

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

func openBackend(t *testing.T) *backend.Backend {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd")
	}
	b, err := backend.Open(backend.Config{Etcd: storagetest.StartEtcd(t), Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
	if _, err := NewLeases(nil, nil, 0); err == nil {
		t.Error("NewLeases accepted no client")
	}
}

func TestDesiredEndpoints(t *testing.T) {
	ports := []corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP}}
	addrs := func(ips ...string) []corev1.EndpointAddress {
		out := []corev1.EndpointAddress{}
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	for _, tt := range []struct {
		name string
		have []corev1.EndpointSubset
		ips  []string
		want []corev1.EndpointSubset
	}{
		{"empty", nil, []string{"10.0.0.2", "10.0.0.1"}, []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: ports}}},
		{"a server left", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: ports}}, []string{"10.0.0.1"},
			[]corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: ports}}},
		{"wrong port", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{{Name: "https", Port: 1}}}}, []string{"10.0.0.1"},
			[]corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: ports}}},
		{"two subsets", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1")}, {Addresses: addrs("10.0.0.9")}}, []string{"10.0.0.1"},
			[]corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: ports}}},
		{"not ready addresses", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), NotReadyAddresses: addrs("10.0.0.3"), Ports: ports}}, []string{"10.0.0.1"},
			[]corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: ports}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := desiredEndpoints(&corev1.Endpoints{Subsets: tt.have}, tt.ips, ports)
			if !reflect.DeepEqual(got.Subsets, tt.want) {
				t.Errorf("subsets %+v, want %+v", got.Subsets, tt.want)
			}
			if got.Labels[discoveryv1.LabelSkipMirror] != "true" {
				t.Errorf("labels %v, want the skip-mirror label", got.Labels)
			}
		})
	}
}

// TestLeasesExpire: a server's key goes away with its TTL when it stops
// refreshing it, and a stopped Keeper removes its key at once.
func TestLeasesExpire(t *testing.T) {
	b := openBackend(t)
	l, err := NewLeases(b.Etcd, b.Codec, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Update(ctx, netip.MustParseAddr("10.0.0.9")); err != nil {
		t.Fatal(err)
	}
	k, err := NewKeeper(l, netip.MustParseAddr("10.0.0.1"), 100*time.Millisecond, storagetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { k.Run(kctx) })
	defer func() { stop(); wg.Wait() }()
	list := func(want ...string) func() error {
		return func() error {
			got, err := l.List(ctx)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				return errors.New("leases " + join(got))
			}
			return nil
		}
	}
	storagetest.Eventually(t, 10*time.Second, "both leases", list("10.0.0.1", "10.0.0.9"))
	storagetest.Eventually(t, 15*time.Second, "the unrefreshed lease expiring", list("10.0.0.1"))
	stop()
	wg.Wait()
	if err := list()(); err != nil {
		t.Errorf("after the keeper stopped: %v", err)
	}
}

func join(s []string) string {
	out := ""
	for _, x := range s {
		out += x + " "
	}
	return out
}

// TestReconcile: the Service, Endpoints and EndpointSlice are made as
// upstream's, follow the servers coming and going, and a changed Service
// port is reset.
func TestReconcile(t *testing.T) {
	b := openBackend(t)
	sem, err := builtin.New(registry.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	leases, err := NewLeases(b.Etcd, b.Codec, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	self := netip.MustParseAddr("10.0.0.1")
	c, err := New(Config{
		Store: b.Store, Registry: b.Registry, Semantics: sem, ServiceIPs: b.ServiceIPs, Leases: leases, Logger: storagetest.Logger(t),
		ServiceIP: b.ServiceIPs.Reserved(), Self: func() (netip.Addr, int, bool) { return self, 6443, true },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	other := netip.MustParseAddr("10.0.0.2")
	if err := leases.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(res *registry.Resource) runtime.Object {
		t.Helper()
		obj, err := b.Store.Get(ctx, res, "default", Name, 0)
		if err != nil {
			t.Fatalf("%s: %v", res.Kind, err)
		}
		return obj
	}
	svc := get(c.services).(*corev1.Service)
	wantPorts := []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(6443)}}
	if svc.Spec.ClusterIP != b.ServiceIPs.Reserved() || !reflect.DeepEqual(svc.Spec.Ports, wantPorts) || svc.Spec.Type != corev1.ServiceTypeClusterIP ||
		svc.Labels["component"] != "apiserver" || svc.Labels["provider"] != "kubernetes" || svc.Spec.InternalTrafficPolicy == nil {
		t.Errorf("service %+v", svc)
	}
	if err := b.ServiceIPs.AllocateSpecific(ctx, svc.Spec.ClusterIP, "default", "someone-else"); err == nil {
		t.Error("the kubernetes service's cluster IP is not allocated")
	}
	checkEndpoints := func(ips ...string) {
		t.Helper()
		ep := get(c.endpoints).(*corev1.Endpoints)
		var got []string
		for _, a := range ep.Subsets[0].Addresses {
			got = append(got, a.IP)
		}
		if len(ep.Subsets) != 1 || !reflect.DeepEqual(got, ips) || ep.Subsets[0].Ports[0].Port != 6443 {
			t.Errorf("endpoints %+v, want %v on 6443", ep.Subsets, ips)
		}
		s := get(c.slices).(*discoveryv1.EndpointSlice)
		got = nil
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				t.Errorf("endpoint %v not ready", e.Addresses)
			}
			got = append(got, e.Addresses...)
		}
		if !reflect.DeepEqual(got, ips) || s.AddressType != discoveryv1.AddressTypeIPv4 || s.Labels[discoveryv1.LabelServiceName] != Name ||
			len(s.Ports) != 1 || *s.Ports[0].Port != 6443 || *s.Ports[0].Name != "https" {
			t.Errorf("endpointslice %+v, want %v", s, ips)
		}
	}
	checkEndpoints("10.0.0.1", "10.0.0.2")

	if err := leases.Remove(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.Update(ctx, c.services, "default", Name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		s := cur.(*corev1.Service).DeepCopy()
		s.Spec.Ports[0].Port = 8443
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	checkEndpoints("10.0.0.1")
	if got := get(c.services).(*corev1.Service).Spec.Ports; !reflect.DeepEqual(got, wantPorts) {
		t.Errorf("service ports %+v not reset to %+v", got, wantPorts)
	}
}
