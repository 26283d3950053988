package defaults

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

func namespace(ns *corev1.Namespace) {
	// A namespace being created with generateName has no name yet: the
	// label is then set when the name is (kube-apiserver does it again in
	// the namespace strategy).
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

func node(n *corev1.Node) {
	st := &n.Status
	if st.Allocatable == nil && st.Capacity != nil {
		st.Allocatable = make(corev1.ResourceList, len(st.Capacity))
		for name, q := range st.Capacity {
			st.Allocatable[name] = q.DeepCopy()
		}
	}
	resourceList(st.Capacity)
	resourceList(st.Allocatable)
}

func persistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	s := &pv.Spec
	if s.PersistentVolumeReclaimPolicy == "" {
		s.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if s.VolumeMode == nil {
		s.VolumeMode = new(corev1.PersistentVolumeFilesystem)
	}
	resourceList(s.Capacity)
	src := &s.PersistentVolumeSource
	if src.HostPath != nil {
		hostPath(src.HostPath)
	}
	if r := src.RBD; r != nil {
		rbd(&r.RBDPool, &r.RadosUser, &r.Keyring)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if src.AzureDisk != nil {
		azureDisk(src.AzureDisk)
	}
	if s := src.ScaleIO; s != nil {
		scaleIO(&s.StorageMode, &s.FSType)
	}
}

func persistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	persistentVolumeClaimSpec(&pvc.Spec)
	resourceList(pvc.Status.Capacity)
	resourceList(pvc.Status.AllocatedResources)
}

func persistentVolumeClaimSpec(s *corev1.PersistentVolumeClaimSpec) {
	if s.VolumeMode == nil {
		s.VolumeMode = new(corev1.PersistentVolumeFilesystem)
	}
	resourceList(s.Resources.Limits)
	resourceList(s.Resources.Requests)
}

// limitRange defaults, for container limits only, the default limit to the
// max and the default request to the default limit, else to the min.
func limitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		if item.Type == corev1.LimitTypeContainer {
			if item.Default == nil {
				item.Default = corev1.ResourceList{}
			}
			if item.DefaultRequest == nil {
				item.DefaultRequest = corev1.ResourceList{}
			}
			fillMissing(item.Default, item.Max)
			fillMissing(item.DefaultRequest, item.Default)
			fillMissing(item.DefaultRequest, item.Min)
		}
		resourceList(item.Max)
		resourceList(item.Min)
		resourceList(item.Default)
		resourceList(item.DefaultRequest)
		resourceList(item.MaxLimitRequestRatio)
	}
}

// fillMissing copies into dst the quantities of src that dst lacks.
func fillMissing(dst, src corev1.ResourceList) {
	for name, q := range src {
		if _, ok := dst[name]; !ok {
			dst[name] = q.DeepCopy()
		}
	}
}

func replicationController(rc *corev1.ReplicationController) {
	if t := rc.Spec.Template; t != nil && t.Labels != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = maps.Clone(t.Labels)
		}
		if len(rc.Labels) == 0 {
			rc.Labels = maps.Clone(t.Labels)
		}
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = new(int32(1))
	}
	if rc.Spec.Template != nil {
		podSpec(&rc.Spec.Template.Spec)
	}
}
