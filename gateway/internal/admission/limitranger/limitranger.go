// Package limitranger is kube-apiserver's LimitRanger admission plugin
// for pods' containers: LimitRanges of type Container in the pod's
// namespace default the containers' requests and limits (mutating phase)
// and bound them by min, max and maxLimitRequestRatio (validating
// phase).
package limitranger

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
)

// lister lists the LimitRanges of a namespace (feed.Store).
type lister interface {
	List(ns string) []runtime.Object
}

// Plugin is LimitRanger.
type Plugin struct{ LimitRanges lister }

func (p Plugin) pod(a *admission.Attributes) (*corev1.Pod, []corev1.LimitRangeItem) {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Operation != admission.Create || a.Subresource != "" {
		return nil, nil
	}
	var items []corev1.LimitRangeItem
	for _, o := range p.LimitRanges.List(a.Namespace) {
		if lr, ok := o.(*corev1.LimitRange); ok {
			for _, it := range lr.Spec.Limits {
				if it.Type == corev1.LimitTypeContainer {
					items = append(items, it)
				}
			}
		}
	}
	return pod, items
}

// Admit applies default requests and limits to the containers of a new
// pod.
func (p Plugin) Admit(_ context.Context, a *admission.Attributes) error {
	pod, items := p.pod(a)
	for _, it := range items {
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				c := &cs[i]
				if c.Resources.Limits == nil && len(it.Default) > 0 {
					c.Resources.Limits = corev1.ResourceList{}
				}
				for n, q := range it.Default {
					if _, ok := c.Resources.Limits[n]; !ok {
						c.Resources.Limits[n] = q.DeepCopy()
					}
				}
				if c.Resources.Requests == nil && len(it.DefaultRequest) > 0 {
					c.Resources.Requests = corev1.ResourceList{}
				}
				for n, q := range it.DefaultRequest {
					if _, ok := c.Resources.Requests[n]; !ok {
						c.Resources.Requests[n] = q.DeepCopy()
					}
				}
			}
		}
	}
	return nil
}

// Validate checks the containers of a new pod against min and max.
func (p Plugin) Validate(_ context.Context, a *admission.Attributes) error {
	pod, items := p.pod(a)
	var errs []string
	for _, it := range items {
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				for n, min := range it.Min {
					if req, ok := c.Resources.Requests[n]; !ok {
						errs = append(errs, fmt.Sprintf("minimum %s usage per Container is %s.  No request is specified", n, min.String()))
					} else if req.Cmp(min) < 0 {
						errs = append(errs, fmt.Sprintf("minimum %s usage per Container is %s, but request is %s", n, min.String(), req.String()))
					}
				}
				for n, max := range it.Max {
					if lim, ok := c.Resources.Limits[n]; !ok {
						errs = append(errs, fmt.Sprintf("maximum %s usage per Container is %s.  No limit is specified", n, max.String()))
					} else if lim.Cmp(max) > 0 {
						errs = append(errs, fmt.Sprintf("maximum %s usage per Container is %s, but limit is %s", n, max.String(), lim.String()))
					}
				}
				for n, ratio := range it.MaxLimitRequestRatio {
					req, ok1 := c.Resources.Requests[n]
					lim, ok2 := c.Resources.Limits[n]
					if !ok1 || !ok2 || req.IsZero() {
						continue
					}
					if got := float64(lim.MilliValue()) / float64(req.MilliValue()); got > ratio.AsApproximateFloat64() {
						errs = append(errs, fmt.Sprintf("%s max limit to request ratio per Container is %s, but provided ratio is %f", n, ratio.String(), got))
					}
				}
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierror.Forbidden(a.GVR().GroupResource(), a.Name, fmt.Errorf("[%s]", strings.Join(errs, ", ")))
}
