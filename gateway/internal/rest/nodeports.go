package rest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	var taken []int
	release = func() { h.releaseNodePorts(taken) }
	reserve := func(path *field.Path, port int) error {
		if slices.Contains(taken, port) {
			return nil
		}
		if err := h.cfg.NodePorts.Allocate(ctx, port); err != nil {
			return nodePortError(svc.Name, path, port, err)
		}
		taken = append(taken, port)
		return nil
	}
	if needsNodePorts(svc) {
		// Ports asked for first, so a port given out next is never one
		// another port of this Service asked for.
		for i, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				if err := reserve(field.NewPath("spec", "ports").Index(i).Child("nodePort"), int(p.NodePort)); err != nil {
					release()
					return nil, err
				}
			}
		}
		byPort := map[int32]int32{} // service port → node port given to it
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			if np, ok := byPort[p.Port]; ok {
				p.NodePort = np
				continue
			}
			np, err := h.cfg.NodePorts.AllocateNext(ctx)
			if err != nil {
				release()
				return nil, nodePortError(svc.Name, field.NewPath("spec", "ports").Index(i).Child("nodePort"), 0, err)
			}
			taken = append(taken, np)
			p.NodePort, byPort[p.Port] = int32(np), int32(np)
		}
	}
	if needsHealthCheckNodePort(svc) {
		path := field.NewPath("spec", "healthCheckNodePort")
		if hc := int(svc.Spec.HealthCheckNodePort); hc != 0 {
			if err := reserve(path, hc); err != nil {
				release()
				return nil, err
			}
		} else {
			np, err := h.cfg.NodePorts.AllocateNext(ctx)
			if err != nil {
				release()
				return nil, nodePortError(svc.Name, path, 0, err)
			}
			taken = append(taken, np)
			svc.Spec.HealthCheckNodePort = int32(np)
		}
	}
	return release, nil
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
