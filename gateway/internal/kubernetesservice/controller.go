// Package kubernetesservice keeps the "kubernetes" Service in the
// default namespace and its Endpoints and EndpointSlice as
// kube-apiserver's kubernetesservice controller and lease endpoint
// reconciler keep them: the Service (ClusterIP the first address of the
// service CIDR, port 443 "https" to the servers' advertised port, labels
// provider=kubernetes, component=apiserver) is created when missing and
// its ports and type reset when changed; its Endpoints list the IPs of the
// live servers, each of which keeps a key under /registry/masterleases/
// with a 15 s etcd lease (Keeper, every gateway), and its EndpointSlice
// mirrors the Endpoints (upstream's EndpointsAdapter). Unlike upstream,
// where every server reconciles, the controllers' leader does (Controller).
//
// As upstream, all servers are taken to serve on the same port: the
// leader's advertised port. Several gateways on one IP (kgate dev) are one
// address.
package kubernetesservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	endpointsv1 "k8s.io/kubernetes/pkg/api/v1/endpoints"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Name is the Service's name; it lives in metav1.NamespaceDefault.
const Name = "kubernetes"

// DefaultServicePort is the Service's port.
const DefaultServicePort = 443

// Store is what the controller needs of storage.Store.
type Store interface {
	Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error)
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
	Delete(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error)
}

// Semantics is upstream's create semantics (builtin.Semantics): the
// Service is created with the defaults and validation of one created
// through the API.
type Semantics interface {
	Create(ctx context.Context, res *registry.Resource, subresource string, obj runtime.Object) (builtin.Result, error)
}

// ServiceIPs reserves the Service's cluster IP (storage/ipalloc).
type ServiceIPs interface {
	AllocateSpecific(ctx context.Context, ip, namespace, name string) error
}

// Config configures a Controller.
type Config struct {
	Store      Store              // required
	Registry   *registry.Registry // required
	Semantics  Semantics          // required
	ServiceIPs ServiceIPs         // optional: nil reserves no IPAddress
	Leases     *Leases            // required
	Logger     *slog.Logger       // required
	// ServiceIP is the Service's cluster IP, the first address of the
	// service CIDR (ipalloc.Allocator.Reserved). Required.
	ServiceIP string
	// ServicePort is the Service's port; default DefaultServicePort.
	ServicePort int
	// Self is this server's advertised IP and port, known once it
	// listens; Run waits for it.
	Self func() (netip.Addr, int, bool)
	// Interval between reconciliations; default DefaultInterval.
	Interval time.Duration
}

// Controller keeps the Service, Endpoints and EndpointSlice.
type Controller struct {
	cfg                 Config
	services, endpoints *registry.Resource
	slices              *registry.Resource
}

// New checks cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Semantics == nil || cfg.Leases == nil || cfg.Logger == nil || cfg.Self == nil {
		return nil, errors.New("cannot make the kubernetes service controller: Store, Registry, Semantics, Leases, Self and Logger are required")
	}
	if _, err := netip.ParseAddr(cfg.ServiceIP); err != nil {
		return nil, fmt.Errorf("cannot make the kubernetes service controller: service IP: %w", err)
	}
	if cfg.ServicePort <= 0 {
		cfg.ServicePort = DefaultServicePort
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	c := &Controller{cfg: cfg}
	var ok1, ok2, ok3 bool
	c.services, ok1 = cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("services"))
	c.endpoints, ok2 = cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("endpoints"))
	c.slices, ok3 = cfg.Registry.Lookup(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	if !ok1 || !ok2 || !ok3 {
		return nil, errors.New("cannot make the kubernetes service controller: services, endpoints or endpointslices are not served")
	}
	return c, nil
}

// Run reconciles now and every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("cannot reconcile the kubernetes service", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reconcile makes one pass: the Service, then its Endpoints and
// EndpointSlice (upstream's UpdateKubernetesService with reconcile on).
func (c *Controller) Reconcile(ctx context.Context) error {
	ip, port, ok := c.cfg.Self()
	if !ok {
		return errors.New("this server's advertised address is not known yet")
	}
	ports := []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: int32(c.cfg.ServicePort), Name: "https", TargetPort: intstr.FromInt32(int32(port))}}
	if err := c.service(ctx, ports); err != nil {
		return err
	}
	// The leader's own key, as upstream's ReconcileEndpoints updates it
	// first: the endpoints never miss the server writing them.
	if err := c.cfg.Leases.Update(ctx, ip); err != nil {
		return err
	}
	return c.reconcileEndpoints(ctx, []corev1.EndpointPort{{Protocol: corev1.ProtocolTCP, Port: int32(port), Name: "https"}})
}

// service creates the Service or resets its ports and type
// (upstream's CreateOrUpdateMasterServiceIfNeeded and
// getMasterServiceUpdateIfNeeded).
func (c *Controller) service(ctx context.Context, ports []corev1.ServicePort) error {
	_, err := c.cfg.Store.Update(ctx, c.services, metav1.NamespaceDefault, Name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		svc, ok := cur.(*corev1.Service)
		if !ok {
			return nil, fmt.Errorf("service %s stored as %T", Name, cur)
		}
		if reflect.DeepEqual(svc.Spec.Ports, ports) && svc.Spec.Type == corev1.ServiceTypeClusterIP {
			return svc, nil
		}
		svc = svc.DeepCopy()
		c.cfg.Logger.Warn("resetting the kubernetes service", "ports", ports)
		svc.Spec.Ports, svc.Spec.Type = ports, corev1.ServiceTypeClusterIP
		return svc, nil
	})
	if !errors.Is(err, storage.ErrNotFound) {
		if err != nil {
			return fmt.Errorf("cannot update service %s: %w", Name, err)
		}
		return nil
	}
	if c.cfg.ServiceIPs != nil {
		if err := c.cfg.ServiceIPs.AllocateSpecific(ctx, c.cfg.ServiceIP, metav1.NamespaceDefault, Name); err != nil {
			return fmt.Errorf("cannot create service %s: %w", Name, err)
		}
	}
	singleStack := corev1.IPFamilyPolicySingleStack
	family := corev1.IPv4Protocol
	if netip.MustParseAddr(c.cfg.ServiceIP).Is6() {
		family = corev1.IPv6Protocol
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"provider": "kubernetes", "component": "apiserver"},
		},
		Spec: corev1.ServiceSpec{
			Ports: ports, ClusterIP: c.cfg.ServiceIP, ClusterIPs: []string{c.cfg.ServiceIP},
			IPFamilyPolicy: &singleStack, IPFamilies: []corev1.IPFamily{family},
			SessionAffinity: corev1.ServiceAffinityNone, Type: corev1.ServiceTypeClusterIP,
		},
	}
	got, err := c.cfg.Semantics.Create(ctx, c.services, "", svc)
	if err != nil {
		return fmt.Errorf("cannot create service %s: %w", Name, err)
	}
	if len(got.Errors) > 0 {
		return fmt.Errorf("cannot create service %s: %w", Name, got.Errors.ToAggregate())
	}
	if _, err := c.cfg.Store.Create(ctx, c.services, got.Object); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
		return fmt.Errorf("cannot create service %s: %w", Name, err)
	}
	return nil
}

// reconcileEndpoints is upstream's leaseEndpointReconciler.doReconcile:
// one subset of the live servers' IPs with ports, the skip-mirror label,
// the Endpoints rewritten only when its format, IPs or ports are wrong;
// the EndpointSlice made from it either way.
func (c *Controller) reconcileEndpoints(ctx context.Context, ports []corev1.EndpointPort) error {
	ips, err := c.cfg.Leases.List(ctx)
	if err != nil {
		return err
	}
	if len(ips) == 0 {
		return errors.New("no API server IP addresses were listed in storage, refusing to erase all endpoints for the kubernetes Service")
	}
	ep, err := c.cfg.Store.Update(ctx, c.endpoints, metav1.NamespaceDefault, Name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		e, ok := cur.(*corev1.Endpoints)
		if !ok {
			return nil, fmt.Errorf("endpoints %s stored as %T", Name, cur)
		}
		return desiredEndpoints(e.DeepCopy(), ips, ports), nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		ep, err = c.cfg.Store.Create(ctx, c.endpoints, desiredEndpoints(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: metav1.NamespaceDefault}}, ips, ports))
		if errors.Is(err, storage.ErrAlreadyExists) {
			return nil // another writer made it; the next pass checks it
		}
	}
	if err != nil {
		return fmt.Errorf("cannot reconcile endpoints %s: %w", Name, err)
	}
	e, ok := ep.(*corev1.Endpoints)
	if !ok {
		return fmt.Errorf("endpoints %s stored as %T", Name, ep)
	}
	return c.slice(ctx, sliceFromEndpoints(e))
}

// desiredEndpoints changes e as upstream's doReconcile does.
func desiredEndpoints(e *corev1.Endpoints, ips []string, ports []corev1.EndpointPort) *corev1.Endpoints {
	if e.Labels[discoveryv1.LabelSkipMirror] != "true" {
		if e.Labels == nil {
			e.Labels = map[string]string{}
		}
		e.Labels[discoveryv1.LabelSkipMirror] = "true"
	}
	formatCorrect := len(e.Subsets) == 1 && len(e.Subsets[0].NotReadyAddresses) == 0
	ipsCorrect := formatCorrect && sameIPs(e.Subsets[0].Addresses, ips)
	portsCorrect := formatCorrect && reflect.DeepEqual(e.Subsets[0].Ports, ports)
	if !formatCorrect {
		e.Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{}, Ports: ports}}
	}
	if !ipsCorrect {
		e.Subsets[0].Addresses = make([]corev1.EndpointAddress, len(ips))
		for i, ip := range ips {
			e.Subsets[0].Addresses[i] = corev1.EndpointAddress{IP: ip}
		}
		e.Subsets = endpointsv1.RepackSubsets(e.Subsets)
	}
	if len(e.Subsets) != 0 && !portsCorrect {
		e.Subsets[0].Ports = ports
	}
	return e
}

func sameIPs(addrs []corev1.EndpointAddress, ips []string) bool {
	if len(addrs) != len(ips) {
		return false
	}
	want := make(map[string]bool, len(ips))
	for _, ip := range ips {
		want[ip] = true
	}
	for _, a := range addrs {
		if !want[a.IP] {
			return false
		}
	}
	return true
}

// slice writes the EndpointSlice unless it is as wanted; a change of
// address type is a delete and a create (upstream's
// EnsureEndpointSliceFromEndpoints).
func (c *Controller) slice(ctx context.Context, want *discoveryv1.EndpointSlice) error {
	obj, err := c.cfg.Store.Get(ctx, c.slices, metav1.NamespaceDefault, Name, 0)
	if errors.Is(err, storage.ErrNotFound) {
		if _, err := c.cfg.Store.Create(ctx, c.slices, want); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
			return fmt.Errorf("cannot create endpointslice %s: %w", Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read endpointslice %s: %w", Name, err)
	}
	cur, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return fmt.Errorf("endpointslice %s stored as %T", Name, obj)
	}
	if cur.AddressType != want.AddressType {
		if _, _, err := c.cfg.Store.Delete(ctx, c.slices, metav1.NamespaceDefault, Name, storage.Preconditions{UID: string(cur.UID)}, func(o runtime.Object) (runtime.Object, storage.DeleteAction, error) {
			return o, storage.DeleteRemove, nil
		}); err != nil {
			return fmt.Errorf("cannot replace endpointslice %s: %w", Name, err)
		}
		if _, err := c.cfg.Store.Create(ctx, c.slices, want); err != nil {
			return fmt.Errorf("cannot replace endpointslice %s: %w", Name, err)
		}
		return nil
	}
	if equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(cur.Ports, want.Ports) && equality.Semantic.DeepEqual(cur.Labels, want.Labels) {
		return nil
	}
	rv, err := strconv.ParseInt(cur.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("cannot read endpointslice %s: resourceVersion: %w", Name, err)
	}
	if _, err := c.cfg.Store.Update(ctx, c.slices, metav1.NamespaceDefault, Name, storage.Preconditions{ResourceVersion: rv}, func(o runtime.Object) (runtime.Object, error) {
		s := o.(*discoveryv1.EndpointSlice).DeepCopy()
		s.Labels, s.AddressType, s.Endpoints, s.Ports = want.Labels, want.AddressType, want.Endpoints, want.Ports
		return s, nil
	}); err != nil {
		return fmt.Errorf("cannot update endpointslice %s: %w", Name, err)
	}
	return nil
}

// sliceFromEndpoints is upstream's endpointSliceFromEndpoints.
func sliceFromEndpoints(e *corev1.Endpoints) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: e.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if len(e.Subsets) == 0 {
		return s
	}
	sub := e.Subsets[0]
	for i := range sub.Ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Port: &sub.Ports[i].Port, Name: &sub.Ports[i].Name, Protocol: &sub.Ports[i].Protocol})
	}
	all := append(append([]corev1.EndpointAddress{}, sub.Addresses...), sub.NotReadyAddresses...)
	if len(all) > 0 && allIPv6(all) {
		s.AddressType = discoveryv1.AddressTypeIPv6
	}
	s.Endpoints = append(endpointsOf(sub.Addresses, s.AddressType, true), endpointsOf(sub.NotReadyAddresses, s.AddressType, false)...)
	return s
}

func allIPv6(addrs []corev1.EndpointAddress) bool {
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a.IP); err != nil || !ip.Is6() || ip.Is4In6() {
			return false
		}
	}
	return true
}

func endpointsOf(addrs []corev1.EndpointAddress, t discoveryv1.AddressType, ready bool) []discoveryv1.Endpoint {
	out := []discoveryv1.Endpoint{}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a.IP)
		if err != nil || (ip.Is6() && !ip.Is4In6()) != (t == discoveryv1.AddressTypeIPv6) {
			continue
		}
		out = append(out, discoveryv1.Endpoint{Addresses: []string{a.IP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, TargetRef: a.TargetRef, NodeName: a.NodeName})
	}
	return out
}
