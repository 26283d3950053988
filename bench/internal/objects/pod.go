// Package objects builds the objects the harness writes: a realistic Pod
// of about 4.7 KB of JSON once its status is filled (labels, owner, two
// containers with env, resources and probes, conditions and container
// statuses) and ConfigMaps of a chosen size.
package objects

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Label keys the harness sets on everything it creates.
const (
	LabelBench = "bench.kgate.io/harness" // value "true"
	LabelSet   = "bench.kgate.io/set"     // which data set (seed, write, memory, watch)
)

// Pod is a Deployment-owned Pod as a controller would create it, bound to
// a node (no scheduler needed). i varies names, IPs and the hash.
func Pod(namespace, name, set string, i int) *corev1.Pod {
	app := fmt.Sprintf("svc-%02d", i%50)
	hash := fmt.Sprintf("%010x", uint32(i/10)*2654435761)[:10]
	env := func(prefix string) []corev1.EnvVar {
		return []corev1.EnvVar{
			{Name: "APP_NAME", Value: app},
			{Name: "LOG_LEVEL", Value: "info"},
			{Name: prefix + "_PORT", Value: "8080"},
			{Name: "DATABASE_URL", Value: "postgres://db-primary:5432/" + app},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		}
	}
	probe := func(path string, port int32, delay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: delay, TimeoutSeconds: 2, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	res := func(cpu, mem, cpuLim, memLim string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/" + app, ReadOnly: true},
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-prod",
				"app.kubernetes.io/version": "1.24.3",
				"pod-template-hash":         hash, "tier": "backend",
				LabelBench: "true", LabelSet: set,
			},
			Annotations: map[string]string{
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash,
				UID:        types.UID(fmt.Sprintf("6b0c7d2e-%04x-4c1a-9e55-%012x", i%0xffff, i)),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      fmt.Sprintf("node-%03d", i%200),
			ServiceAccountName:            "default",
			AutomountServiceAccountToken:  ptr.To(false),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			DNSPolicy:                     corev1.DNSClusterFirst,
			SchedulerName:                 corev1.DefaultSchedulerName,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](10001), FSGroup: ptr.To[int64](10001)},
			Containers: []corev1.Container{
				{
					Name: "app", Image: "registry.example.com/storefront/" + app + ":1.24.3",
					Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
					Env:             env("HTTP"),
					Resources:       res("250m", "256Mi", "1", "512Mi"),
					LivenessProbe:   probe("/healthz", 8080, 10),
					ReadinessProbe:  probe("/readyz", 8080, 5),
					VolumeMounts:    mounts,
					ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: corev1.TerminationMessagePathDefault,
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				},
				{
					Name: "proxy", Image: "registry.example.com/mesh/proxy:2.9.1",
					Ports:           []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}},
					Env:             env("PROXY")[3:],
					Resources:       res("100m", "64Mi", "500m", "128Mi"),
					ReadinessProbe:  probe("/ready", 15000, 1),
					ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: corev1.TerminationMessagePathDefault,
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}, DefaultMode: ptr.To[int32](0o644)}}},
			},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			PriorityClassName: "", EnableServiceLinks: ptr.To(false),
		},
	}
}

// SetRunningStatus fills pod's status as a kubelet reports a running,
// ready Pod.
func SetRunningStatus(pod *corev1.Pod, i int) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	ip := fmt.Sprintf("10.%d.%d.%d", 64+(i>>16)&63, (i>>8)&255, i&255)
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: t0}
	}
	cs := func(c corev1.Container, n int) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image[:strings.LastIndexByte(c.Image, ':')] + "@sha256:" + fmt.Sprintf("%064x", uint64(i*7+n)),
			ContainerID: fmt.Sprintf("containerd://%064x", uint64(i*131+n)),
			Ready:       true, Started: ptr.To(true), RestartCount: 0,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}},
		}
	}
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady),
			cond(corev1.ContainersReady), cond(corev1.PodScheduled),
		},
		HostIP: fmt.Sprintf("192.168.%d.%d", (i%200)/250, 10+i%200), HostIPs: []corev1.HostIP{{IP: fmt.Sprintf("192.168.%d.%d", (i%200)/250, 10+i%200)}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &t0, QOSClass: corev1.PodQOSBurstable,
		ContainerStatuses: []corev1.ContainerStatus{cs(pod.Spec.Containers[0], 0), cs(pod.Spec.Containers[1], 1)},
	}
}
