package defaults

import (
	corev1 "k8s.io/api/core/v1"
)

// Probe defaults (SetDefaults_Probe).
const (
	probeTimeoutSeconds   = 1
	probePeriodSeconds    = 10
	probeSuccessThreshold = 1
	probeFailureThreshold = 3
)

// tokenExpirationSeconds is the default lifetime of a projected service
// account token: one hour.
const tokenExpirationSeconds int64 = 3600

// pod applies the defaults of a Pod: those only a Pod gets
// (SetDefaults_Pod) and those of every PodSpec.
func pod(p *corev1.Pod) {
	s := &p.Spec
	requestsFromLimits(s.Containers)
	requestsFromLimits(s.InitContainers)
	podLevelResources(p)
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = new(corev1.DefaultEnableServiceLinks)
	}
	if s.HostNetwork {
		hostNetworkPorts(s.Containers)
		hostNetworkPorts(s.InitContainers)
	}
	podSpec(s)
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for i := range list {
			resourceList(list[i].AllocatedResources)
			if r := list[i].Resources; r != nil {
				resourceList(r.Limits)
				resourceList(r.Requests)
			}
		}
	}
}

// podSpec applies the defaults of every PodSpec, in a Pod or in a pod
// template (SetDefaults_PodSpec and the defaulters of its nested structs).
func podSpec(s *corev1.PodSpec) {
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = new(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range s.Volumes {
		volume(&s.Volumes[i])
	}
	for i := range s.InitContainers {
		container(&s.InitContainers[i])
	}
	for i := range s.Containers {
		container(&s.Containers[i])
	}
	for i := range s.EphemeralContainers {
		container((*corev1.Container)(&s.EphemeralContainers[i].EphemeralContainerCommon))
	}
	resourceList(s.Overhead)
	if r := s.Resources; r != nil {
		resourceList(r.Limits)
		resourceList(r.Requests)
	}
}

// container applies the defaults of a container, init container or
// ephemeral container.
func container(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		from := c.Env[i].ValueFrom
		if from == nil {
			continue
		}
		if from.FieldRef != nil {
			fieldSelector(from.FieldRef)
		}
		if from.FileKeyRef != nil && from.FileKeyRef.Optional == nil {
			from.FileKeyRef.Optional = new(false)
		}
	}
	resourceList(c.Resources.Limits)
	resourceList(c.Resources.Requests)
	probe(c.LivenessProbe)
	probe(c.ReadinessProbe)
	probe(c.StartupProbe)
	if l := c.Lifecycle; l != nil {
		lifecycleHandler(l.PostStart)
		lifecycleHandler(l.PreStop)
	}
}

func probe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = probeTimeoutSeconds
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = probePeriodSeconds
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = probeSuccessThreshold
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = probeFailureThreshold
	}
	if p.HTTPGet != nil {
		httpGet(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = new("")
	}
}

func lifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil && h.HTTPGet != nil {
		httpGet(h.HTTPGet)
	}
}

func httpGet(a *corev1.HTTPGetAction) {
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Scheme == "" {
		a.Scheme = corev1.URISchemeHTTP
	}
}

func fieldSelector(f *corev1.ObjectFieldSelector) {
	if f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// hostNetworkPorts defaults the host port of every container port to the
// container port, for pods on the host network.
func hostNetworkPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			p := &containers[i].Ports[j]
			if p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

// volume applies the defaults of a pod volume and of its source.
func volume(v *corev1.Volume) {
	if noVolumeSource(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	src := &v.VolumeSource
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = pullPolicy(src.Image.Reference)
	}
	if src.HostPath != nil {
		hostPath(src.HostPath)
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = new(corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if r := src.RBD; r != nil {
		rbd(&r.RBDPool, &r.RadosUser, &r.Keyring)
	}
	if d := src.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = new(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		downwardAPIItems(d.Items)
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = new(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if src.AzureDisk != nil {
		azureDisk(src.AzureDisk)
	}
	if p := src.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = new(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range p.Sources {
			s := &p.Sources[i]
			if s.DownwardAPI != nil {
				downwardAPIItems(s.DownwardAPI.Items)
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				s.ServiceAccountToken.ExpirationSeconds = new(tokenExpirationSeconds)
			}
		}
	}
	if s := src.ScaleIO; s != nil {
		scaleIO(&s.StorageMode, &s.FSType)
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		persistentVolumeClaimSpec(&e.VolumeClaimTemplate.Spec)
	}
}

func downwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil {
			fieldSelector(items[i].FieldRef)
		}
	}
}

func hostPath(h *corev1.HostPathVolumeSource) {
	if h.Type == nil {
		h.Type = new(corev1.HostPathUnset)
	}
}

func rbd(pool, user, keyring *string) {
	if *pool == "" {
		*pool = "rbd"
	}
	if *user == "" {
		*user = "admin"
	}
	if *keyring == "" {
		*keyring = "/etc/ceph/keyring"
	}
}

func azureDisk(a *corev1.AzureDiskVolumeSource) {
	if a.CachingMode == nil {
		a.CachingMode = new(corev1.AzureDataDiskCachingReadWrite)
	}
	if a.Kind == nil {
		a.Kind = new(corev1.AzureSharedBlobDisk)
	}
	if a.FSType == nil {
		a.FSType = new("ext4")
	}
	if a.ReadOnly == nil {
		a.ReadOnly = new(false)
	}
}

func scaleIO(storageMode, fsType *string) {
	if *storageMode == "" {
		*storageMode = "ThinProvisioned"
	}
	if *fsType == "" {
		*fsType = "xfs"
	}
}

// noVolumeSource reports whether no source of the volume is set
// (utilpointer.AllPtrFieldsNil in kube-apiserver); a test checks that the
// list names every field of corev1.VolumeSource.
func noVolumeSource(s *corev1.VolumeSource) bool {
	return s.HostPath == nil && s.EmptyDir == nil && s.GCEPersistentDisk == nil &&
		s.AWSElasticBlockStore == nil && s.GitRepo == nil && s.Secret == nil &&
		s.NFS == nil && s.ISCSI == nil && s.Glusterfs == nil &&
		s.PersistentVolumeClaim == nil && s.RBD == nil && s.FlexVolume == nil &&
		s.Cinder == nil && s.CephFS == nil && s.Flocker == nil &&
		s.DownwardAPI == nil && s.FC == nil && s.AzureFile == nil &&
		s.ConfigMap == nil && s.VsphereVolume == nil && s.Quobyte == nil &&
		s.AzureDisk == nil && s.PhotonPersistentDisk == nil && s.Projected == nil &&
		s.PortworxVolume == nil && s.ScaleIO == nil && s.StorageOS == nil &&
		s.CSI == nil && s.Ephemeral == nil && s.Image == nil
}
