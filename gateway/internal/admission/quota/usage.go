package quota

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countedCore are the core resources quota counts by their bare name.
var countedCore = map[string]bool{
	"pods": true, "services": true, "configmaps": true, "secrets": true,
	"persistentvolumeclaims": true,
	"replicationcontrollers": true, "resourcequotas": true,
}

// countName is the "count/<resource>.<group>" name of gr.
func countName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// parseCount returns the resource a count name counts.
func parseCount(name corev1.ResourceName) (schema.GroupResource, bool) {
	n := string(name)
	if countedCore[n] {
		return schema.GroupResource{Resource: n}, true
	}
	rest, ok := strings.CutPrefix(n, "count/")
	if !ok {
		return schema.GroupResource{}, false
	}
	r, g, _ := strings.Cut(rest, ".")
	return schema.GroupResource{Group: g, Resource: r}, true
}

// usage is what obj of gr consumes of every quota resource kgate tracks.
func usage(gr schema.GroupResource, obj runtime.Object) corev1.ResourceList {
	if !counted(obj) {
		return nil
	}
	one := resource.MustParse("1")
	u := corev1.ResourceList{countName(gr): one}
	if gr.Group == "" && countedCore[gr.Resource] {
		u[corev1.ResourceName(gr.Resource)] = one
	}
	switch o := obj.(type) {
	case *corev1.Service:
		// Upstream's service evaluator: every port of a NodePort or
		// LoadBalancer service takes a node port.
		ports := *resource.NewQuantity(int64(len(o.Spec.Ports)), resource.DecimalSI)
		switch o.Spec.Type {
		case corev1.ServiceTypeNodePort:
			u[corev1.ResourceServicesNodePorts] = ports
		case corev1.ServiceTypeLoadBalancer:
			u[corev1.ResourceServicesLoadBalancers] = one
			if o.Spec.AllocateLoadBalancerNodePorts == nil || *o.Spec.AllocateLoadBalancerNodePorts {
				u[corev1.ResourceServicesNodePorts] = ports
			}
		}
	case *corev1.PersistentVolumeClaim:
		// Upstream's PVC evaluator: the requested storage, also per
		// storage class.
		storage, ok := o.Spec.Resources.Requests[corev1.ResourceStorage]
		if class := o.Spec.StorageClassName; class != nil && *class != "" {
			prefix := *class + ".storageclass.storage.k8s.io/"
			u[corev1.ResourceName(prefix+"persistentvolumeclaims")] = one
			if ok {
				u[corev1.ResourceName(prefix+"requests.storage")] = storage.DeepCopy()
			}
		}
		if ok {
			u[corev1.ResourceRequestsStorage] = storage.DeepCopy()
		}
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		req, lim := podRequests(pod)
		for n, q := range req {
			u[corev1.ResourceName("requests."+string(n))] = q
			u[n] = q
		}
		for n, q := range lim {
			u[corev1.ResourceName("limits."+string(n))] = q
		}
	}
	return u
}

// podRequests sums the containers' requests and limits, then takes the
// larger of that and each init container's, as upstream's evaluator.
func podRequests(pod *corev1.Pod) (req, lim corev1.ResourceList) {
	req, lim = corev1.ResourceList{}, corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		add(req, c.Resources.Requests)
		add(lim, c.Resources.Limits)
	}
	for _, c := range pod.Spec.InitContainers {
		maxOf(req, c.Resources.Requests)
		maxOf(lim, c.Resources.Limits)
	}
	for _, l := range []corev1.ResourceList{req, lim} {
		for n := range l {
			if n != corev1.ResourceCPU && n != corev1.ResourceMemory && n != corev1.ResourceEphemeralStorage {
				delete(l, n)
			}
		}
	}
	return req, lim
}

func add(into, l corev1.ResourceList) {
	for n, q := range l {
		cur := into[n]
		cur.Add(q)
		into[n] = cur
	}
}

func maxOf(into, l corev1.ResourceList) {
	for n, q := range l {
		if cur, ok := into[n]; !ok || q.Cmp(cur) > 0 {
			into[n] = q.DeepCopy()
		}
	}
}

// delta returns the positive parts of next − prev: what an update takes
// more of (upstream's SubtractWithNonNegativeResult).
func delta(next, prev corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range next {
		d := q.DeepCopy()
		if p, ok := prev[n]; ok {
			d.Sub(p)
		}
		if d.Sign() > 0 {
			out[n] = d
		}
	}
	return out
}

// counted reports whether obj uses quota. An object stops using it when
// its deletion starts (deletionTimestamp set), so that a graceful or
// finalized deletion, which takes several requests, refunds once; a pod
// also stops when it has run to completion (Succeeded or Failed), as
// upstream's pod evaluator.
func counted(obj runtime.Object) bool {
	if m, err := meta.Accessor(obj); err == nil && m.GetDeletionTimestamp() != nil {
		return false
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
	}
	return true
}
