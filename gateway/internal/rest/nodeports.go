package rest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage/portalloc"
)

// needsNodePorts reports whether kube-apiserver gives svc's ports node
// ports: a NodePort Service, or a LoadBalancer unless
// spec.allocateLoadBalancerNodePorts is false.
func needsNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

// needsHealthCheckNodePort: a LoadBalancer with externalTrafficPolicy
// Local (upstream's apiservice.NeedsHealthCheck).
func needsHealthCheckNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		(svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal)
}

// allocateNodePorts gives svc's ports their node ports as upstream's
// service REST does on create (initNodePorts, allocHealthCheckNodePort):
// a port asked for is reserved (422 "provided port is already allocated"
// when taken), a port without one gets the next free one, and ports of
// one number (TCP and UDP of the same port) share it.
func (h *Handler) allocateNodePorts(ctx context.Context, svc *corev1.Service) (release func(), err error) {
	if h.cfg.NodePorts == nil {
		return func() {}, nil
	}
	var took []int
	release = func() { h.releaseNodePorts(took) }
	if err := h.fillNodePorts(ctx, svc, nil, &took); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// fillNodePorts gives svc the node ports it needs that held (what the
// Service held before an update) does not have: a port asked for is
// reserved (422 "provided port is already allocated" when taken), a port
// without one gets the next free one, ports of one number (TCP and UDP
// of the same port) share it, and a health check node port likewise.
// What it takes is added to took, also when it fails.
func (h *Handler) fillNodePorts(ctx context.Context, svc *corev1.Service, held []int, took *[]int) error {
	reserve := func(path *field.Path, port int) error {
		if slices.Contains(held, port) || slices.Contains(*took, port) {
			return nil
		}
		if err := h.cfg.NodePorts.Allocate(ctx, port); err != nil {
			return nodePortError(svc.Name, path, port, err)
		}
		*took = append(*took, port)
		return nil
	}
	nextFree := func(path *field.Path) (int32, error) {
		np, err := h.cfg.NodePorts.AllocateNext(ctx)
		if err != nil {
			return 0, nodePortError(svc.Name, path, 0, err)
		}
		*took = append(*took, np)
		return int32(np), nil
	}
	if needsNodePorts(svc) {
		// Ports asked for first, so a port given out next is never one
		// another port of this Service asked for.
		byPort := map[int32]int32{} // service port → its node port
		for i, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				if err := reserve(field.NewPath("spec", "ports").Index(i).Child("nodePort"), int(p.NodePort)); err != nil {
					return err
				}
				byPort[p.Port] = p.NodePort
			}
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			if np, ok := byPort[p.Port]; ok {
				p.NodePort = np
				continue
			}
			np, err := nextFree(field.NewPath("spec", "ports").Index(i).Child("nodePort"))
			if err != nil {
				return err
			}
			p.NodePort, byPort[p.Port] = np, np
		}
	}
	if needsHealthCheckNodePort(svc) {
		path := field.NewPath("spec", "healthCheckNodePort")
		if hc := int(svc.Spec.HealthCheckNodePort); hc != 0 {
			return reserve(path, hc)
		}
		np, err := nextFree(path)
		if err != nil {
			return err
		}
		svc.Spec.HealthCheckNodePort = np
	}
	return nil
}

// nodePortError is what kube-apiserver answers when a node port cannot
// be had: 422 with the allocator's message on the port's field.
func nodePortError(name string, path *field.Path, port int, err error) error {
	var notIn *portallocator.ErrNotInRange
	var detail string
	switch {
	case errors.As(err, &notIn):
		detail = notIn.Error()
	case errors.Is(err, portalloc.ErrAllocated):
		detail = portalloc.ErrAllocated.Error()
	case errors.Is(err, portalloc.ErrFull):
		return apierror.Invalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), name,
			field.ErrorList{field.Invalid(path, port, fmt.Sprintf("failed to allocate a nodePort: %v", portalloc.ErrFull))})
	default:
		return fmt.Errorf("cannot allocate node port: %w", err)
	}
	return apierror.Invalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), name, field.ErrorList{field.Invalid(path, port, detail)})
}

// releaseNodePorts gives ports back, logging a failure (the repair loop
// releases what is left behind).
func (h *Handler) releaseNodePorts(ports []int) {
	if h.cfg.NodePorts == nil || len(ports) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.base), 10*time.Second)
	defer cancel()
	if err := h.cfg.NodePorts.Release(ctx, ports...); err != nil {
		h.cfg.Logger.Warn("cannot release node ports", "ports", ports, "err", err)
	}
}

// serviceUpdate is what a Service update took from the pools and what it
// frees, as upstream's service REST keeps them (allocateUpdate, then the
// transaction's commit or revert): storage may run an update several
// times (conflicts), so each attempt gives back what the one before took.
type serviceUpdate struct {
	h     *Handler
	ports []int  // node ports this attempt took
	ip    string // the cluster IP this attempt took
	// freed: what the old Service held (or this attempt took) that the
	// stored Service does not, given back once it is stored.
	freedPorts []int
	freedIPs   []string
}

// revert gives back what the latest attempt took (nothing for a nil u).
func (u *serviceUpdate) revert() {
	if u == nil {
		return
	}
	u.h.releaseNodePorts(u.ports)
	if u.ip != "" {
		u.h.releaseIP(u.ip)
	}
	*u = serviceUpdate{h: u.h}
}

// commit gives back what the stored update freed (nothing for a nil u).
func (u *serviceUpdate) commit() {
	if u == nil {
		return
	}
	u.h.releaseNodePorts(u.freedPorts)
	for _, ip := range u.freedIPs {
		u.h.releaseIP(ip)
	}
	*u = serviceUpdate{h: u.h}
}

// beginUpdate gives a Service being updated, before its strategy
// validates it, the node ports its new spec needs that the old one did
// not hold: as upstream's BeginUpdate hook, ports when it becomes a
// NodePort or LoadBalancer or gains a port, a health check node port
// when it becomes a LoadBalancer with traffic policy Local.
func (h *Handler) beginUpdate(ctx context.Context, r *request, next, old runtime.Object) error {
	svc, ok1 := next.(*corev1.Service)
	prev, ok2 := old.(*corev1.Service)
	u := r.serviceUpdate
	if !ok1 || !ok2 || u == nil {
		return nil
	}
	u.revert() // what an attempt before this one (a conflict) took
	if h.cfg.NodePorts == nil {
		return nil
	}
	return h.fillNodePorts(ctx, svc, portalloc.ServicePorts(prev), &u.ports)
}

// settleUpdate settles a Service update once its strategy has run: a
// cluster IP when it stops being an ExternalName (or headless), and what
// the stored Service no longer holds, to give back once stored.
func (h *Handler) settleUpdate(ctx context.Context, r *request, next, old runtime.Object) error {
	svc, ok1 := next.(*corev1.Service)
	prev, ok2 := old.(*corev1.Service)
	u := r.serviceUpdate
	if !ok1 || !ok2 || u == nil {
		return nil
	}
	had := needsClusterIP(prev) && prev.Spec.ClusterIP != ""
	if h.cfg.ServiceIPs != nil && needsClusterIP(svc) && !had {
		if _, err := h.allocateIP(ctx, svc); err != nil {
			return err
		}
		u.ip = svc.Spec.ClusterIP
	}
	if had && svc.Spec.ClusterIP != prev.Spec.ClusterIP {
		u.freedIPs = append(u.freedIPs, prev.Spec.ClusterIP)
	}
	keep := portalloc.ServicePorts(svc)
	for _, p := range append(portalloc.ServicePorts(prev), u.ports...) {
		if !slices.Contains(keep, p) && !slices.Contains(u.freedPorts, p) {
			u.freedPorts = append(u.freedPorts, p)
		}
	}
	return nil
}
