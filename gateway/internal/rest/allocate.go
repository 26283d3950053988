package rest

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage/ipalloc"
)

// serviceIPs allocates Service cluster IPs consistently across gateways.
type serviceIPs interface {
	Allocate(ctx context.Context, namespace, name string) (string, error)
	AllocateSpecific(ctx context.Context, ip, namespace, name string) error
	Release(ctx context.Context, ip string) error
}

// needsClusterIP reports whether kube-apiserver gives svc a cluster IP.
func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// allocate takes what a new object needs from shared pools (a Service's
// cluster IP) and returns how to give it back if the create fails.
func (h *Handler) allocate(ctx context.Context, obj runtime.Object) (release func(), err error) {
	svc, ok := obj.(*corev1.Service)
	if !ok || h.cfg.ServiceIPs == nil || !needsClusterIP(svc) {
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
}

// releaseAllocations gives back what a deleted object held.
func (h *Handler) releaseAllocations(obj runtime.Object) {
	if svc, ok := obj.(*corev1.Service); ok && h.cfg.ServiceIPs != nil && needsClusterIP(svc) && svc.Spec.ClusterIP != "" {
		h.releaseIP(svc.Spec.ClusterIP)
	}
}

func (h *Handler) releaseIP(ip string) {
	ctx, cancel := context.WithTimeout(h.base, 10*time.Second)
	defer cancel()
	if err := h.cfg.ServiceIPs.Release(ctx, ip); err != nil {
		h.cfg.Logger.Warn("cannot release cluster IP", "ip", ip, "err", err)
	}
}
