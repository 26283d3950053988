// Package defaults applies kube-apiserver's built-in v1 defaulting to the
// typed objects of k8s.io/api, as kube-apiserver does to every object it
// decodes on create, update and patch: the SetDefaults_* functions of
// k8s.io/kubernetes/pkg/apis/<group>/<version>/defaults.go and the +default
// markers of k8s.io/api, applied to the nested structs the generated
// zz_generated.defaults.go names (every PodSpec inside a PodTemplateSpec,
// every container, volume, probe, ...).
//
// It follows the feature set of Kubernetes v1.37 with each feature gate at
// its default. Defaulting only fills fields that are unset, so applying it
// twice changes nothing.
package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Apply sets the defaults kube-apiserver sets on obj, a typed built-in
// object of a served kind (*appsv1.Deployment, *corev1.Pod, ...). Objects
// of kinds without defaults (Lease, Event, Role, ...) and of other types
// are left alone.
func Apply(obj runtime.Object) {
	switch o := obj.(type) {
	// core/v1
	case *corev1.Pod:
		pod(o)
	case *corev1.PodTemplate:
		podSpec(&o.Template.Spec)
	case *corev1.ReplicationController:
		replicationController(o)
	case *corev1.Service:
		service(o)
	case *corev1.Endpoints:
		endpoints(o)
	case *corev1.Namespace:
		namespace(o)
	case *corev1.Node:
		node(o)
	case *corev1.PersistentVolume:
		persistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		persistentVolumeClaim(o)
	case *corev1.Secret:
		if o.Type == "" {
			o.Type = corev1.SecretTypeOpaque
		}
	case *corev1.ConfigMap:
		if o.Data == nil {
			o.Data = map[string]string{}
		}
	case *corev1.LimitRange:
		limitRange(o)
	case *corev1.ResourceQuota:
		resourceList(o.Spec.Hard)
		resourceList(o.Status.Hard)
		resourceList(o.Status.Used)

	// apps/v1
	case *appsv1.Deployment:
		deployment(o)
	case *appsv1.ReplicaSet:
		replicaSet(o)
	case *appsv1.StatefulSet:
		statefulSet(o)
	case *appsv1.DaemonSet:
		daemonSet(o)

	// batch/v1
	case *batchv1.Job:
		job(o)
	case *batchv1.CronJob:
		cronJob(o)

	// autoscaling/v2
	case *autoscalingv2.HorizontalPodAutoscaler:
		horizontalPodAutoscaler(o)

	// discovery.k8s.io/v1
	case *discoveryv1.EndpointSlice:
		endpointSlice(o)

	// networking.k8s.io/v1
	case *networkingv1.NetworkPolicy:
		networkPolicy(o)
	case *networkingv1.IngressClass:
		ingressClass(o)

	// rbac.authorization.k8s.io/v1
	case *rbacv1.RoleBinding:
		roleRef(&o.RoleRef)
		subjects(o.Subjects)
	case *rbacv1.ClusterRoleBinding:
		roleRef(&o.RoleRef)
		subjects(o.Subjects)

	// scheduling.k8s.io/v1
	case *schedulingv1.PriorityClass:
		if o.PreemptionPolicy == nil {
			o.PreemptionPolicy = new(corev1.PreemptLowerPriority)
		}

	// storage.k8s.io/v1
	case *storagev1.StorageClass:
		storageClass(o)

	// admissionregistration.k8s.io/v1
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			validatingWebhook(&o.Webhooks[i])
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			mutatingWebhook(&o.Webhooks[i])
		}
	}
}
