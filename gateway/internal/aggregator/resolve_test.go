package aggregator

import (
	"context"
	"errors"
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// memStore is an objectStore over a few objects, by resource, namespace
// and name.
type memStore map[string]runtime.Object

func (m memStore) Get(_ context.Context, res *registry.Resource, ns, name string, _ int64) (runtime.Object, error) {
	if obj, ok := m[res.Key(ns, name)]; ok {
		return obj, nil
	}
	return nil, storage.ErrNotFound
}

func (m memStore) List(_ context.Context, res *registry.Resource, ns string, _ storage.ListOptions) (*storage.ListResult, error) {
	out := &storage.ListResult{Revision: 1}
	prefix := res.ListPrefix(ns)
	for k, obj := range m {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			out.Items = append(out.Items, obj)
		}
	}
	return out, nil
}

func TestResolve(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	svcRes, _ := reg.Lookup(servicesGVR)
	sliceRes, _ := reg.Lookup(slicesGVR)
	store := memStore{}
	service := func(name, clusterIP string) {
		store[svcRes.Key("ext", name)] = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ext", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP,
				Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}},
		}
	}
	slice := func(service, addr string, ready bool) {
		store[sliceRes.Key("ext", service+"-abc")] = &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ext", Name: service + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](8443)}},
		}
	}
	service("api", "10.96.0.10")
	slice("api", "10.244.1.7", true)
	service("local", "10.96.0.11")
	slice("local", "127.0.0.1", true)
	service("linklocal", "169.254.1.1")
	service("headless", corev1.ClusterIPNone)
	service("down", "10.96.0.12")
	slice("down", "10.244.1.8", false)

	f := func(name string, routing, loopback bool, svc string, port *int32, want string, wantErr func(error) bool) {
		t.Run(name, func(t *testing.T) {
			r := &Resolver{Registry: reg, Store: store, AggregatorRouting: routing, AllowLoopback: loopback}
			u, err := r.Resolve(t.Context(), &apiregistrationv1.ServiceReference{Namespace: "ext", Name: svc, Port: port})
			if wantErr != nil {
				if err == nil || !wantErr(err) {
					t.Fatalf("Resolve = %v, %v; want a matching error", u, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.String() != want {
				t.Errorf("Resolve = %s, want %s", u, want)
			}
		})
	}
	isAddress := func(err error) bool { return errors.Is(err, ErrAddress) }
	anyErr := func(error) bool { return true }
	f("cluster IP", false, false, "api", nil, "https://10.96.0.10:443", nil)
	f("cluster IP, port named", false, false, "api", ptr.To[int32](443), "https://10.96.0.10:443", nil)
	f("no such port", false, false, "api", ptr.To[int32](444), "", anyErr)
	f("no such service", false, false, "nope", nil, "", apierrors.IsNotFound)
	f("headless", false, false, "headless", nil, "", anyErr)
	f("link-local cluster IP refused", false, false, "linklocal", nil, "", isAddress)
	f("link-local cluster IP when allowed", false, true, "linklocal", nil, "https://169.254.1.1:443", nil)
	f("endpoint", true, false, "api", nil, "https://10.244.1.7:8443", nil)
	f("loopback endpoint refused", true, false, "local", nil, "", isAddress)
	f("loopback endpoint when allowed", true, true, "local", nil, "https://127.0.0.1:8443", nil)
	f("no ready endpoint", true, false, "down", nil, "", apierrors.IsServiceUnavailable)
	f("no slices", true, false, "headless", nil, "", anyErr)
	if _, err := (&Resolver{Registry: reg, Store: store}).Resolve(t.Context(), nil); err == nil {
		t.Error("a local APIService resolved")
	}
}

// TestDial: a name that resolves to loopback (an ExternalName Service's)
// is refused at dial time unless loopback targets are allowed.
func TestDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	for _, allow := range []bool{false, true} {
		r := &Resolver{AllowLoopback: allow}
		c, err := r.Dial(t.Context(), "tcp", net.JoinHostPort("localhost", port))
		if c != nil {
			c.Close()
		}
		if allow && err != nil {
			t.Errorf("loopback allowed: %v", err)
		}
		if !allow && !errors.Is(err, ErrAddress) {
			t.Errorf("loopback not allowed: %v, want ErrAddress", err)
		}
	}
}
