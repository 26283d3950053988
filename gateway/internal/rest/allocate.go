package rest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/portalloc"
)

// serviceIPs allocates Service cluster IPs consistently across gateways.
type serviceIPs interface {
	Allocate(ctx context.Context, namespace, name string) (string, error)
	AllocateSpecific(ctx context.Context, ip, namespace, name string) error
	Release(ctx context.Context, ip string) error
}

// nodePorts allocates Service node ports consistently across gateways
// (storage/portalloc).
type nodePorts interface {
	Allocate(ctx context.Context, port int) error
	AllocateNext(ctx context.Context) (int, error)
	Release(ctx context.Context, ports ...int) error
}

// needsClusterIP reports whether kube-apiserver gives svc a cluster IP.
func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// allocate takes the cluster IP a new Service needs (its node ports were
// taken before its strategy ran: beginCreate) and returns how to give it
// back if the create fails.
func (h *Handler) allocate(ctx context.Context, obj runtime.Object) (release func(), err error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return func() {}, nil
	}
	return h.allocateIP(ctx, svc)
}

// beginCreate takes the node ports a new Service needs before its
// strategy validates it, as upstream's BeginCreate hook does (validation
// requires a Local LoadBalancer's health check node port), and returns
// how to give them back if the create fails.
func (h *Handler) beginCreate(ctx context.Context, obj runtime.Object) (release func(), err error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return func() {}, nil
	}
	return h.allocateNodePorts(ctx, svc)
}

// allocateIP gives svc its cluster IP.
func (h *Handler) allocateIP(ctx context.Context, svc *corev1.Service) (release func(), err error) {
	if h.cfg.ServiceIPs == nil || !needsClusterIP(svc) {
		return func() {}, nil
	}
	ip := svc.Spec.ClusterIP
	if ip == "" {
		if ip, err = h.cfg.ServiceIPs.Allocate(ctx, svc.Namespace, svc.Name); err != nil {
			return nil, fmt.Errorf("cannot allocate a cluster IP: %w", ipError(err))
		}
	} else if err := h.cfg.ServiceIPs.AllocateSpecific(ctx, ip, svc.Namespace, svc.Name); err != nil {
		return nil, fmt.Errorf("cannot allocate cluster IP %s: %w", ip, ipError(err))
	}
	svc.Spec.ClusterIP = ip
	svc.Spec.ClusterIPs = []string{ip}
	return func() { h.releaseIP(ip) }, nil
}

// ipError turns allocator refusals into what kube-apiserver answers.
func ipError(err error) error {
	switch {
	case errors.Is(err, ipalloc.ErrAllocated):
		return apierror.Invalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), "",
			fieldErrors("spec.clusterIPs", "", "provided IP is already allocated"))
	case errors.Is(err, ipalloc.ErrNotInRange):
		return apierror.Invalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), "",
			fieldErrors("spec.clusterIPs", "", "provided IP is not in the valid range"))
	case errors.Is(err, ipalloc.ErrFull):
		return apierror.Invalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), "",
			fieldErrors("spec.clusterIPs", "", "range is full"))
	}
	return err
}

// defaultIPFamily is the IP family of kgate's service CIDR (single-stack
// IPv4), the family of Services whose cluster IPs do not tell theirs.
const defaultIPFamily = corev1.IPv4Protocol

// setIPFamilies sets the IP family fields of a Service as kube-apiserver's
// service REST does before its strategy validates the Service (upstream's
// allocator, not its defaulting or strategy, sets them: they depend on the
// cluster's service CIDRs), on a single-stack cluster of family:
// spec.clusterIPs from a lone spec.clusterIP, spec.ipFamilyPolicy
// (SingleStack; RequireDualStack for a headless Service without
// selector) and spec.ipFamilies from the cluster IPs, else family. Fields
// already set are kept; ExternalName Services and other objects are left
// alone.
func setIPFamilies(obj runtime.Object, family corev1.IPFamily) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	s := &svc.Spec
	if s.Type == corev1.ServiceTypeExternalName {
		return
	}
	if s.ClusterIP != "" && len(s.ClusterIPs) == 0 {
		s.ClusterIPs = []string{s.ClusterIP}
	}
	headlessNoSelector := s.ClusterIP == corev1.ClusterIPNone && len(s.Selector) == 0
	if s.IPFamilyPolicy == nil {
		p := corev1.IPFamilyPolicySingleStack
		if headlessNoSelector {
			p = corev1.IPFamilyPolicyRequireDualStack
		}
		s.IPFamilyPolicy = &p
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

// keepAllocations carries what was allocated for cur into next: a
// Service's cluster IP cannot change on update.
func keepAllocations(next, cur runtime.Object) {
	n, ok1 := next.(*corev1.Service)
	c, ok2 := cur.(*corev1.Service)
	if !ok1 || !ok2 {
		return
	}
	if n.Spec.ClusterIP == "" || n.Spec.ClusterIP == c.Spec.ClusterIP {
		n.Spec.ClusterIP = c.Spec.ClusterIP
		n.Spec.ClusterIPs = c.Spec.ClusterIPs
	}
	keepNodePorts(n, c)
}

// keepNodePorts carries the node ports cur holds into next where next
// leaves them unset, as upstream's service REST does on update
// (patchAllocatedValues): a port keeps its node port, matched by port
// and protocol, and the health check node port stays.
func keepNodePorts(next, cur *corev1.Service) {
	if needsNodePorts(cur) && needsNodePorts(next) {
		for i := range next.Spec.Ports {
			p := &next.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			for _, old := range cur.Spec.Ports {
				if old.Port == p.Port && old.Protocol == p.Protocol {
					p.NodePort = old.NodePort
					break
				}
			}
		}
	}
	if needsHealthCheckNodePort(cur) && needsHealthCheckNodePort(next) && next.Spec.HealthCheckNodePort == 0 {
		next.Spec.HealthCheckNodePort = cur.Spec.HealthCheckNodePort
	}
}

// releaseAllocations gives back what a deleted object held.
func (h *Handler) releaseAllocations(obj runtime.Object) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	if h.cfg.ServiceIPs != nil && needsClusterIP(svc) && svc.Spec.ClusterIP != "" {
		h.releaseIP(svc.Spec.ClusterIP)
	}
	h.releaseNodePorts(portalloc.ServicePorts(svc))
}

func (h *Handler) releaseIP(ip string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.base), 10*time.Second)
	defer cancel()
	if err := h.cfg.ServiceIPs.Release(ctx, ip); err != nil {
		h.cfg.Logger.Warn("cannot release cluster IP", "ip", ip, "err", err)
	}
}
