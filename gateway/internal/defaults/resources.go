package defaults

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// milliScale is the scale resource quantities are rounded up to.
const milliScale = -3

// resourceList rounds every quantity up to milli precision
// (SetDefaults_ResourceList): 0.0001 CPU is stored as 1m.
func resourceList(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(milliScale)
		list[name] = q
	}
}

// requestsFromLimits sets, in a Pod only, the request of every resource a
// container limits but does not request to the limit.
func requestsFromLimits(containers []corev1.Container) {
	for i := range containers {
		r := &containers[i].Resources
		if r.Limits == nil {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		for name, q := range r.Limits {
			if _, ok := r.Requests[name]; !ok {
				r.Requests[name] = q.DeepCopy()
			}
		}
	}
}

// podLevelResources defaults the pod-level resources (spec.resources, the
// PodLevelResources feature) when they are partly set: hugepage limits from
// the containers' limits, requests from the containers' requests or the
// pod-level limits, and limits from the containers' limits.
func podLevelResources(p *corev1.Pod) {
	hugePagePodLimits(p)
	podRequests(p)
	podLimits(p)
}

func hugePagePodLimits(p *corev1.Pod) {
	r := p.Spec.Resources
	if r == nil || len(r.Limits) == 0 && len(r.Requests) == 0 {
		return
	}
	limits := r.Limits
	if limits == nil {
		limits = corev1.ResourceList{}
	}
	for name, q := range aggregate(&p.Spec, limitsOf) {
		if !podLevelResource(name) || !hugePages(name) {
			continue
		}
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if _, ok := limits[name]; !ok {
			limits[name] = q.DeepCopy()
		}
	}
	if len(limits) > 0 {
		r.Limits = limits
	}
}

func podRequests(p *corev1.Pod) {
	r := p.Spec.Resources
	if r == nil || len(r.Limits) == 0 {
		return
	}
	requests := r.Requests
	if requests == nil {
		requests = corev1.ResourceList{}
	}
	for name, q := range aggregate(&p.Spec, requestsOf) {
		if _, ok := requests[name]; !ok && podLevelResource(name) && overcommitAllowed(name) {
			requests[name] = q.DeepCopy()
		}
	}
	for name, q := range r.Limits {
		if _, ok := requests[name]; !ok && podLevelResource(name) {
			requests[name] = q.DeepCopy()
		}
	}
	if len(requests) > 0 {
		r.Requests = requests
	}
}

func podLimits(p *corev1.Pod) {
	r := p.Spec.Resources
	if r == nil || hasPodLevel(r.Limits) || !hasPodLevel(r.Requests) {
		return
	}
	limits := r.Limits
	if limits == nil {
		limits = corev1.ResourceList{}
	}
	for name, q := range aggregate(&p.Spec, limitsOf) {
		if _, ok := limits[name]; ok || !podLevelResource(name) || !overcommitAllowed(name) {
			continue
		}
		if !allContainersLimit(&p.Spec, name) {
			continue
		}
		limits[name] = q.DeepCopy()
	}
	if len(limits) > 0 {
		r.Limits = limits
	}
}

func requestsOf(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests }
func limitsOf(c *corev1.Container) corev1.ResourceList   { return c.Resources.Limits }

// aggregate sums what of the containers the way the scheduler does with
// sidecars: regular and restartable init containers add up; an ordinary init
// container needs its own amount plus that of the sidecars started before
// it; the pod needs the larger of the two.
func aggregate(s *corev1.PodSpec, what func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range s.Containers {
		addList(total, what(&s.Containers[i]))
	}
	sidecars, inits := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range s.InitContainers {
		c := &s.InitContainers[i]
		need := what(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addList(total, need)
			addList(sidecars, need)
			need = sidecars
		} else {
			tmp := corev1.ResourceList{}
			addList(tmp, need)
			addList(tmp, sidecars)
			need = tmp
		}
		maxList(inits, need)
	}
	maxList(total, inits)
	return total
}

// allContainersLimit reports whether every container and init container
// of s sets a limit for name.
func allContainersLimit(s *corev1.PodSpec, name corev1.ResourceName) bool {
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range list {
			if _, ok := list[i].Resources.Limits[name]; !ok {
				return false
			}
		}
	}
	return true
}

func addList(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; ok {
			cur.Add(q)
			dst[name] = cur
		} else {
			dst[name] = q.DeepCopy()
		}
	}
}

func maxList(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

// podLevelResource reports whether name may be set in spec.resources: cpu,
// memory and hugepages.
func podLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || hugePages(name)
}

func hasPodLevel(list corev1.ResourceList) bool {
	for name := range list {
		if podLevelResource(name) {
			return true
		}
	}
	return false
}

func hugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// overcommitAllowed reports whether requests of name may be lower than its
// limits: native resources other than hugepages.
func overcommitAllowed(name corev1.ResourceName) bool {
	s := string(name)
	native := !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
	return native && !hugePages(name)
}
