package devcluster_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/storage/registry"
)

// An invalidCase is one invalid write: a create of the minimal object of
// kind (minimalObjects) changed by mutate, or, with update set, a valid
// create followed by an update of it changed by mutate. want is a field
// path (a prefix) upstream's validation must name among the causes.
type invalidCase struct {
	kind   string // group/resource
	want   string
	update bool
	mutate func(obj runtime.Object)
}

func create(kind, want string, mutate func(obj runtime.Object)) invalidCase {
	return invalidCase{kind: kind, want: want, mutate: mutate}
}

func update(kind, want string, mutate func(obj runtime.Object)) invalidCase {
	return invalidCase{kind: kind, want: want, update: true, mutate: mutate}
}

// pathSegmentNames are the kinds upstream names with path segment rules
// (anything but "/", "%", "." and ".."), not DNS names (a
// CertificateSigningRequest's name function, ValidateCertificateRequestName,
// accepts every name, leaving only the path segment rules).
var pathSegmentNames = map[string]bool{
	"/events": true, "events.k8s.io/events": true,
	"certificates.k8s.io/certificatesigningrequests": true,
	"rbac.authorization.k8s.io/roles":                true, "rbac.authorization.k8s.io/clusterroles": true,
	"rbac.authorization.k8s.io/rolebindings": true, "rbac.authorization.k8s.io/clusterrolebindings": true,
}

// invalidCases are the name rules of every stored kind and the
// hand-picked invalid objects of invalidSpecs.
func invalidCases() []invalidCase {
	var cases []invalidCase
	for _, res := range storedResources() {
		key := res.Group + "/" + res.Resource
		if noMinimalObject[key] {
			continue // no valid object to break yet (generatename_test.go)
		}
		cases = append(cases, create(key, "metadata.name", func(obj runtime.Object) { mustMeta(obj).SetName("bad/name") }))
		if !pathSegmentNames[key] && key != "policy/poddisruptionbudgets" { // upstream takes upper case PDB names
			cases = append(cases, create(key, "metadata.name", func(obj runtime.Object) { mustMeta(obj).SetName("Bad.Name") }))
		}
	}
	return append(cases, invalidSpecs...)
}

func mustMeta(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	return m
}

func podOf(obj runtime.Object) *corev1.Pod { return obj.(*corev1.Pod) }
func ctr(obj runtime.Object) *corev1.Container {
	return &obj.(*corev1.Pod).Spec.Containers[0]
}
func svc(obj runtime.Object) *corev1.Service    { return obj.(*corev1.Service) }
func dep(obj runtime.Object) *appsv1.Deployment { return obj.(*appsv1.Deployment) }
func jobOf(obj runtime.Object) *batchv1.Job     { return obj.(*batchv1.Job) }

var invalidSpecs = []invalidCase{
	// Pods: missing fields, bad enums, bad quantities, names.
	create("/pods", "spec.containers", func(o runtime.Object) { podOf(o).Spec.Containers = nil }),
	create("/pods", "spec.restartPolicy", func(o runtime.Object) { podOf(o).Spec.RestartPolicy = "Sometimes" }),
	create("/pods", "spec.containers[0].imagePullPolicy", func(o runtime.Object) { ctr(o).ImagePullPolicy = "Sometimes" }),
	create("/pods", "spec.dnsPolicy", func(o runtime.Object) { podOf(o).Spec.DNSPolicy = "Bogus" }),
	create("/pods", "spec.containers[0].name", func(o runtime.Object) { ctr(o).Name = "Bad_Name" }),
	create("/pods", "spec.containers[1].name", func(o runtime.Object) { podOf(o).Spec.Containers = append(podOf(o).Spec.Containers, *ctr(o)) }),
	create("/pods", "spec.containers[0].image", func(o runtime.Object) { ctr(o).Image = "" }),
	create("/pods", "spec.containers[0].resources.requests", func(o runtime.Object) {
		ctr(o).Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}
	}),
	create("/pods", "spec.containers[0].resources.requests[memory]", func(o runtime.Object) {
		ctr(o).Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi")}
	}),
	create("/pods", "spec.containers[0].ports[0].containerPort", func(o runtime.Object) { ctr(o).Ports = []corev1.ContainerPort{{ContainerPort: 0}} }),
	create("/pods", "spec.containers[0].ports[0].protocol", func(o runtime.Object) {
		ctr(o).Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "XTP"}}
	}),
	create("/pods", "spec.containers[0].volumeMounts[0].name", func(o runtime.Object) {
		ctr(o).VolumeMounts = []corev1.VolumeMount{{Name: "missing", MountPath: "/data"}}
	}),
	create("/pods", "spec.activeDeadlineSeconds", func(o runtime.Object) { podOf(o).Spec.ActiveDeadlineSeconds = ptr.To[int64](0) }),
	create("/pods", "spec.containers[0].env[0].name", func(o runtime.Object) { ctr(o).Env = []corev1.EnvVar{{Name: "", Value: "x"}} }),
	create("/pods", "metadata.labels", func(o runtime.Object) { mustMeta(o).SetLabels(map[string]string{"app": "bad value!"}) }),
	create("/pods", "metadata.annotations", func(o runtime.Object) { mustMeta(o).SetAnnotations(map[string]string{"bad key": "v"}) }),
	create("/pods", "spec.nodeSelector", func(o runtime.Object) { podOf(o).Spec.NodeSelector = map[string]string{"bad key": "v"} }),
	update("/pods", "spec", func(o runtime.Object) { podOf(o).Spec.RestartPolicy = corev1.RestartPolicyNever }),

	// Workloads: selector mismatch, bad enums, negative counts, immutability.
	create("apps/deployments", "spec.template.metadata.labels", func(o runtime.Object) { dep(o).Spec.Template.Labels = map[string]string{"x": "y"} }),
	create("apps/deployments", "spec.selector", func(o runtime.Object) { dep(o).Spec.Selector = &metav1.LabelSelector{} }),
	create("apps/deployments", "spec.replicas", func(o runtime.Object) { dep(o).Spec.Replicas = ptr.To[int32](-1) }),
	create("apps/deployments", "spec.strategy", func(o runtime.Object) { dep(o).Spec.Strategy.Type = "Bogus" }),
	create("apps/deployments", "spec.template.spec.restartPolicy", func(o runtime.Object) {
		dep(o).Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	}),
	create("apps/deployments", "spec.revisionHistoryLimit", func(o runtime.Object) { dep(o).Spec.RevisionHistoryLimit = ptr.To[int32](-1) }),
	create("apps/deployments", "spec.minReadySeconds", func(o runtime.Object) { dep(o).Spec.MinReadySeconds = -1 }),
	create("apps/deployments", "spec.template.spec.containers", func(o runtime.Object) { dep(o).Spec.Template.Spec.Containers = nil }),
	update("apps/deployments", "spec.selector", func(o runtime.Object) {
		d := dep(o)
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gen", "v": "2"}}
		d.Spec.Template.Labels = map[string]string{"app": "gen", "v": "2"}
	}),
	create("apps/replicasets", "spec.template.metadata.labels", func(o runtime.Object) {
		o.(*appsv1.ReplicaSet).Spec.Template.Labels = map[string]string{"x": "y"}
	}),
	create("apps/replicasets", "spec.replicas", func(o runtime.Object) { o.(*appsv1.ReplicaSet).Spec.Replicas = ptr.To[int32](-1) }),
	update("apps/replicasets", "spec.selector", func(o runtime.Object) {
		rs := o.(*appsv1.ReplicaSet)
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gen", "v": "2"}}
		rs.Spec.Template.Labels = map[string]string{"app": "gen", "v": "2"}
	}),
	create("apps/statefulsets", "spec.template.metadata.labels", func(o runtime.Object) {
		o.(*appsv1.StatefulSet).Spec.Template.Labels = map[string]string{"x": "y"}
	}),
	create("apps/statefulsets", "spec.podManagementPolicy", func(o runtime.Object) { o.(*appsv1.StatefulSet).Spec.PodManagementPolicy = "Bogus" }),
	create("apps/statefulsets", "spec.updateStrategy", func(o runtime.Object) { o.(*appsv1.StatefulSet).Spec.UpdateStrategy.Type = "Bogus" }),
	update("apps/statefulsets", "spec", func(o runtime.Object) { o.(*appsv1.StatefulSet).Spec.ServiceName = "other" }),
	create("apps/daemonsets", "spec.template.metadata.labels", func(o runtime.Object) {
		o.(*appsv1.DaemonSet).Spec.Template.Labels = map[string]string{"x": "y"}
	}),
	create("apps/daemonsets", "spec.updateStrategy", func(o runtime.Object) { o.(*appsv1.DaemonSet).Spec.UpdateStrategy.Type = "Bogus" }),
	create("/replicationcontrollers", "spec.template.metadata.labels", func(o runtime.Object) {
		o.(*corev1.ReplicationController).Spec.Template.Labels = map[string]string{"x": "y"}
	}),
	create("/replicationcontrollers", "spec.replicas", func(o runtime.Object) {
		o.(*corev1.ReplicationController).Spec.Replicas = ptr.To[int32](-1)
	}),
	create("/podtemplates", "template.spec.containers", func(o runtime.Object) { o.(*corev1.PodTemplate).Template.Spec.Containers = nil }),
	create("apps/controllerrevisions", "revision", func(o runtime.Object) { o.(*appsv1.ControllerRevision).Revision = -1 }),

	// Batch.
	create("batch/jobs", "spec.template.spec.restartPolicy", func(o runtime.Object) {
		jobOf(o).Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}),
	create("batch/jobs", "spec.parallelism", func(o runtime.Object) { jobOf(o).Spec.Parallelism = ptr.To[int32](-1) }),
	create("batch/jobs", "spec.completions", func(o runtime.Object) { jobOf(o).Spec.Completions = ptr.To[int32](-1) }),
	create("batch/jobs", "spec.backoffLimit", func(o runtime.Object) { jobOf(o).Spec.BackoffLimit = ptr.To[int32](-1) }),
	create("batch/jobs", "spec.completionMode", func(o runtime.Object) {
		m := batchv1.CompletionMode("Bogus")
		jobOf(o).Spec.CompletionMode = &m
	}),
	update("batch/jobs", "spec.template", func(o runtime.Object) { jobOf(o).Spec.Template.Spec.Containers[0].Image = "busybox:1.37" }),
	create("batch/cronjobs", "spec.schedule", func(o runtime.Object) { o.(*batchv1.CronJob).Spec.Schedule = "bogus" }),
	create("batch/cronjobs", "spec.concurrencyPolicy", func(o runtime.Object) { o.(*batchv1.CronJob).Spec.ConcurrencyPolicy = "Bogus" }),
	create("batch/cronjobs", "spec.timeZone", func(o runtime.Object) { o.(*batchv1.CronJob).Spec.TimeZone = ptr.To("Mars/Olympus") }),

	// Services.
	create("/services", "spec.type", func(o runtime.Object) { svc(o).Spec.Type = "Bogus" }),
	create("/services", "spec.ports[0].port", func(o runtime.Object) { svc(o).Spec.Ports[0].Port = 0 }),
	create("/services", "spec.ports[0].port", func(o runtime.Object) { svc(o).Spec.Ports[0].Port = 70000 }),
	create("/services", "spec.ports[1]", func(o runtime.Object) { svc(o).Spec.Ports = append(svc(o).Spec.Ports, svc(o).Spec.Ports[0]) }),
	create("/services", "spec.sessionAffinity", func(o runtime.Object) { svc(o).Spec.SessionAffinity = "Bogus" }),
	create("/services", "spec.ports[0].protocol", func(o runtime.Object) { svc(o).Spec.Ports[0].Protocol = "XTP" }),
	create("/services", "spec.externalName", func(o runtime.Object) {
		svc(o).Spec.Type = corev1.ServiceTypeExternalName
		svc(o).Spec.IPFamilyPolicy, svc(o).Spec.IPFamilies = nil, nil
	}),
	update("/services", "spec.clusterIPs", func(o runtime.Object) {
		svc(o).Spec.ClusterIP, svc(o).Spec.ClusterIPs = "10.0.0.77", []string{"10.0.0.77"}
	}),

	// Config and storage.
	create("/configmaps", "data[bad key]", func(o runtime.Object) { o.(*corev1.ConfigMap).Data = map[string]string{"bad key": "v"} }),
	update("/configmaps", "data", func(o runtime.Object) {
		// Created immutable (see immutableBase), so its data cannot change.
		o.(*corev1.ConfigMap).Data = map[string]string{"k": "changed"}
	}),
	create("/secrets", "data[bad key]", func(o runtime.Object) { o.(*corev1.Secret).Data = map[string][]byte{"bad key": []byte("v")} }),
	create("/secrets", "data[tls.crt]", func(o runtime.Object) { o.(*corev1.Secret).Type = corev1.SecretTypeTLS }),
	update("/secrets", "type", func(o runtime.Object) { o.(*corev1.Secret).Type = "example.com/other" }),
	create("/persistentvolumeclaims", "spec.accessModes", func(o runtime.Object) {
		o.(*corev1.PersistentVolumeClaim).Spec.AccessModes = nil
	}),
	create("/persistentvolumeclaims", "spec.resources[storage]", func(o runtime.Object) {
		o.(*corev1.PersistentVolumeClaim).Spec.Resources.Requests = nil
	}),
	create("/persistentvolumeclaims", "spec.accessModes", func(o runtime.Object) {
		o.(*corev1.PersistentVolumeClaim).Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"Bogus"}
	}),
	update("/persistentvolumeclaims", "spec", func(o runtime.Object) {
		o.(*corev1.PersistentVolumeClaim).Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	}),
	create("/persistentvolumes", "spec.capacity", func(o runtime.Object) { o.(*corev1.PersistentVolume).Spec.Capacity = nil }),
	create("/persistentvolumes", "spec", func(o runtime.Object) {
		o.(*corev1.PersistentVolume).Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{}
	}),
	create("/persistentvolumes", "spec.persistentVolumeReclaimPolicy", func(o runtime.Object) {
		o.(*corev1.PersistentVolume).Spec.PersistentVolumeReclaimPolicy = "Bogus"
	}),
	create("storage.k8s.io/storageclasses", "provisioner", func(o runtime.Object) { o.(*storagev1.StorageClass).Provisioner = "" }),
	create("storage.k8s.io/storageclasses", "reclaimPolicy", func(o runtime.Object) {
		p := corev1.PersistentVolumeReclaimPolicy("Bogus")
		o.(*storagev1.StorageClass).ReclaimPolicy = &p
	}),
	create("storage.k8s.io/storageclasses", "volumeBindingMode", func(o runtime.Object) {
		m := storagev1.VolumeBindingMode("Bogus")
		o.(*storagev1.StorageClass).VolumeBindingMode = &m
	}),
	update("storage.k8s.io/storageclasses", "provisioner", func(o runtime.Object) { o.(*storagev1.StorageClass).Provisioner = "example.com/other" }),

	// Policy, quotas, limits.
	create("/resourcequotas", "spec.hard[cpu]", func(o runtime.Object) {
		o.(*corev1.ResourceQuota).Spec.Hard = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
	}),
	create("/resourcequotas", "spec.scopes", func(o runtime.Object) {
		o.(*corev1.ResourceQuota).Spec.Scopes = []corev1.ResourceQuotaScope{"Bogus"}
	}),
	create("/limitranges", "spec.limits[0].type", func(o runtime.Object) { o.(*corev1.LimitRange).Spec.Limits[0].Type = "Bogus" }),
	create("/limitranges", "spec.limits[0].min[cpu]", func(o runtime.Object) {
		o.(*corev1.LimitRange).Spec.Limits[0].Min = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	}),
	create("policy/poddisruptionbudgets", "spec", func(o runtime.Object) {
		p := o.(*policyv1.PodDisruptionBudget)
		p.Spec.MinAvailable, p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(1))
	}),
	create("policy/poddisruptionbudgets", "spec.minAvailable", func(o runtime.Object) {
		o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable = ptr.To(intstr.FromInt32(-1))
	}),
	create("autoscaling/horizontalpodautoscalers", "spec.maxReplicas", func(o runtime.Object) {
		o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas = 0
	}),
	create("autoscaling/horizontalpodautoscalers", "spec.scaleTargetRef.kind", func(o runtime.Object) {
		o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.ScaleTargetRef.Kind = ""
	}),
	create("scheduling.k8s.io/priorityclasses", "value", func(o runtime.Object) { o.(*schedulingv1.PriorityClass).Value = 2000000000 }),
	create("scheduling.k8s.io/priorityclasses", "preemptionPolicy", func(o runtime.Object) {
		p := corev1.PreemptionPolicy("Bogus")
		o.(*schedulingv1.PriorityClass).PreemptionPolicy = &p
	}),
	update("scheduling.k8s.io/priorityclasses", "value", func(o runtime.Object) { o.(*schedulingv1.PriorityClass).Value = 2000 }),
	create("coordination.k8s.io/leases", "spec.leaseDurationSeconds", func(o runtime.Object) {
		o.(*coordinationv1.Lease).Spec.LeaseDurationSeconds = ptr.To[int32](0)
	}),

	// Networking.
	create("/endpoints", "subsets[0].addresses[0].ip", func(o runtime.Object) {
		o.(*corev1.Endpoints).Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "bogus"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}
	}),
	create("/endpoints", "subsets[0].ports[0].port", func(o runtime.Object) {
		o.(*corev1.Endpoints).Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, Ports: []corev1.EndpointPort{{Port: 0}}}}
	}),
	create("discovery.k8s.io/endpointslices", "addressType", func(o runtime.Object) { o.(*discoveryv1.EndpointSlice).AddressType = "Bogus" }),
	create("discovery.k8s.io/endpointslices", "endpoints[0].addresses[0]", func(o runtime.Object) {
		o.(*discoveryv1.EndpointSlice).Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"bogus"}}}
	}),
	update("discovery.k8s.io/endpointslices", "addressType", func(o runtime.Object) {
		o.(*discoveryv1.EndpointSlice).AddressType = discoveryv1.AddressTypeIPv6
	}),
	create("networking.k8s.io/ingresses", "spec", func(o runtime.Object) { o.(*networkingv1.Ingress).Spec.DefaultBackend = nil }),
	create("networking.k8s.io/ingresses", "spec.rules[0].http.paths[0].pathType", func(o runtime.Object) {
		pt := networkingv1.PathType("Bogus")
		o.(*networkingv1.Ingress).Spec.Rules = []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: *o.(*networkingv1.Ingress).Spec.DefaultBackend}},
		}}}}
	}),
	create("networking.k8s.io/ingressclasses", "spec.controller", func(o runtime.Object) { o.(*networkingv1.IngressClass).Spec.Controller = "" }),
	update("networking.k8s.io/ingressclasses", "spec.controller", func(o runtime.Object) {
		o.(*networkingv1.IngressClass).Spec.Controller = "example.com/other"
	}),
	create("networking.k8s.io/networkpolicies", "spec.podSelector", func(o runtime.Object) {
		o.(*networkingv1.NetworkPolicy).Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"bad key": "v"}}
	}),
	create("networking.k8s.io/networkpolicies", "spec.policyTypes", func(o runtime.Object) {
		o.(*networkingv1.NetworkPolicy).Spec.PolicyTypes = []networkingv1.PolicyType{"Bogus"}
	}),

	// RBAC.
	create("rbac.authorization.k8s.io/roles", "rules[0].verbs", func(o runtime.Object) {
		o.(*rbacv1.Role).Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}
	}),
	create("rbac.authorization.k8s.io/clusterroles", "rules[0].verbs", func(o runtime.Object) {
		o.(*rbacv1.ClusterRole).Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}
	}),
	create("rbac.authorization.k8s.io/rolebindings", "roleRef.kind", func(o runtime.Object) { o.(*rbacv1.RoleBinding).RoleRef.Kind = "Bogus" }),
	create("rbac.authorization.k8s.io/rolebindings", "subjects[0].kind", func(o runtime.Object) {
		o.(*rbacv1.RoleBinding).Subjects = []rbacv1.Subject{{Kind: "Bogus", Name: "x"}}
	}),
	update("rbac.authorization.k8s.io/rolebindings", "roleRef", func(o runtime.Object) { o.(*rbacv1.RoleBinding).RoleRef.Name = "edit" }),
	create("rbac.authorization.k8s.io/clusterrolebindings", "roleRef.name", func(o runtime.Object) {
		o.(*rbacv1.ClusterRoleBinding).RoleRef.Name = ""
	}),

	// Admission configuration.
	create("admissionregistration.k8s.io/validatingwebhookconfigurations", "webhooks[0]", func(o runtime.Object) {
		o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks = []admissionregistrationv1.ValidatingWebhook{{Name: "bad"}}
	}),
	create("admissionregistration.k8s.io/mutatingwebhookconfigurations", "webhooks[0]", func(o runtime.Object) {
		o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks = []admissionregistrationv1.MutatingWebhook{{Name: "bad"}}
	}),
	create("admissionregistration.k8s.io/validatingadmissionpolicies", "spec.validations[0].expression", func(o runtime.Object) {
		o.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec.Validations = []admissionregistrationv1.Validation{{Expression: "object.("}}
	}),
	create("admissionregistration.k8s.io/validatingadmissionpolicybindings", "spec.policyName", func(o runtime.Object) {
		o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.PolicyName = ""
	}),
	create("admissionregistration.k8s.io/validatingadmissionpolicybindings", "spec.validationActions", func(o runtime.Object) {
		o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.ValidationActions = nil
	}),

	// Events.
	create("/events", "involvedObject.namespace", func(o runtime.Object) { o.(*corev1.Event).InvolvedObject.Namespace = "other" }),
	create("events.k8s.io/events", "reportingController", func(o runtime.Object) { o.(*eventsv1.Event).ReportingController = "" }),
}

// immutableBase changes the valid object an update case starts from, for
// the cases whose rule needs it.
func immutableBase(kind string, obj runtime.Object) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && kind == "/configmaps" {
		cm.Immutable = ptr.To(true)
		cm.Data = map[string]string{"k": "v"}
	}
}

// TestInvalidObjects sends each invalid case through the gateway and
// expects upstream's 422 Invalid whose causes name exactly the field
// paths of upstream's own validation (the imported strategies, called
// here directly), and nothing written to etcd.
func TestInvalidObjects(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	rc := newRawClient(t, c)
	ns := uniqueNS("invalid")
	ensureNamespace(t, cs, ns)
	resources := map[string]*registry.Resource{}
	for _, res := range storedResources() {
		resources[res.Group+"/"+res.Resource] = &res
	}
	cases := invalidCases()
	kinds := map[string]bool{}
	for i, tc := range cases {
		kinds[tc.kind] = true
		res := resources[tc.kind]
		if res == nil {
			t.Fatalf("case %d: %s is not served", i, tc.kind)
		}
		// Unique per run, as ns is: cluster-scoped objects of an earlier
		// run (-count) are still there.
		name := fmt.Sprintf("%s-%d", ns, i)
		t.Run(fmt.Sprintf("%d-%s-%s", i, tc.kind, tc.want), func(t *testing.T) {
			obj := minimalObjects[tc.kind](ns)
			obj.GetObjectKind().SetGroupVersionKind(res.GVK())
			mustMeta(obj).SetName(name)
			path := collectionPath(res, ns)
			var old runtime.Object
			if tc.update {
				immutableBase(tc.kind, obj)
				resp, body := rc.do(t, "POST", path, mustJSON(t, obj), "Content-Type", "application/json")
				if resp.StatusCode != 201 {
					t.Fatalf("create the valid object: %d %s", resp.StatusCode, body)
				}
				var err error
				if old, err = decodeAs(res, body); err != nil {
					t.Fatal(err)
				}
				obj = old.DeepCopyObject()
				path += "/" + name
			}
			tc.mutate(obj)
			sent := mustJSON(t, obj)
			want := expectedCauses(t, res, ns, sent, old)
			if !slices.ContainsFunc(want, func(cause string) bool {
				_, path, _ := strings.Cut(cause, " ")
				return strings.HasPrefix(path, tc.want)
			}) {
				t.Fatalf("upstream's validation names %q, not %s: the case is not invalid as meant", want, tc.want)
			}
			rev := etcdRevision(t, c)
			method := "POST"
			if tc.update {
				method = "PUT"
			}
			resp, body := rc.do(t, method, path, sent, "Content-Type", "application/json")
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != 422 || st.Reason != metav1.StatusReasonInvalid || st.Details == nil {
				t.Fatalf("%s: %d %s, want 422 Invalid", method, resp.StatusCode, body)
			}
			var got []string
			for _, cause := range st.Details.Causes {
				got = append(got, string(cause.Type)+" "+cause.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("causes:\n got %q\nwant %q (upstream's validation)", got, want)
			}
			if st.Details.Kind != res.Kind || st.Details.Group != res.Group {
				t.Errorf("details name %s.%s, want %s.%s", st.Details.Kind, st.Details.Group, res.Kind, res.Group)
			}
			// The aggregated ClusterRoles are rewritten in the background
			// (see background); any other key written fails the case.
			if keys := writtenSince(t, c, rev); len(keys) > 0 {
				t.Errorf("etcd written by an invalid %s: %v", method, keys)
			}
		})
	}
	if len(cases) < 100 || len(kinds) < 20 {
		t.Errorf("%d cases over %d kinds, want at least 100 over 20", len(cases), len(kinds))
	}
}

// expectedCauses calls upstream's strategy and validation directly on the
// object the test sends (as the gateway decodes it: its namespace from the
// URL, a uid as the registry store gives one) and returns the causes
// upstream's 422 would carry: type and field path, sorted.
func expectedCauses(t *testing.T, res *registry.Resource, ns string, sent []byte, old runtime.Object) []string {
	t.Helper()
	obj, err := decodeAs(res, sent)
	if err != nil {
		t.Fatal(err)
	}
	m := mustMeta(obj)
	if res.Namespaced && m.GetNamespace() == "" {
		m.SetNamespace(ns)
	}
	if old == nil {
		m.SetUID(types.UID("00000000-0000-4000-8000-000000000001"))
	}
	return upstreamCauses(t, res, obj, old)
}

func decodeAs(res *registry.Resource, data []byte) (runtime.Object, error) {
	obj, err := scheme.Scheme.New(res.GVK())
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func collectionPath(res *registry.Resource, ns string) string {
	p := "/apis/" + res.Group + "/" + res.Version
	if res.Group == "" {
		p = "/api/" + res.Version
	}
	if res.Namespaced {
		p += "/namespaces/" + ns
	}
	return p + "/" + res.Resource
}

func mustJSON(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
