package registry

import (
	"fmt"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// NewScheme returns a scheme knowing every built-in type kgate serves, the
// meta types (Status, List, WatchEvent, Table, ...) and the types of the
// review and subresource APIs.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	adders := []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		coordinationv1.AddToScheme, discoveryv1.AddToScheme, eventsv1.AddToScheme,
		rbacv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
		storagev1.AddToScheme, schedulingv1.AddToScheme, admissionregistrationv1.AddToScheme,
		autoscalingv1.AddToScheme, autoscalingv2.AddToScheme,
		authenticationv1.AddToScheme, authorizationv1.AddToScheme,
		apiextensionsv1.AddToScheme,
		certificatesv1.AddToScheme, flowcontrolv1.AddToScheme, nodev1.AddToScheme, resourcev1.AddToScheme,
		storagemigrationv1.AddToScheme, apiregistrationv1.AddToScheme,
	}
	for _, add := range adders {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("cannot build scheme: %w", err)
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := metav1.AddMetaToScheme(s); err != nil {
		return nil, fmt.Errorf("cannot build scheme: %w", err)
	}
	return s, nil
}

// NewBuiltin returns the registry of the built-in resources.
func NewBuiltin() (*Registry, error) {
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	return New(s, Builtin())
}

// Builtin returns the table of built-in resources, in discovery order.
func Builtin() []Resource {
	all := []string{"all"}
	ext := []string{"api-extensions"}
	create := []string{"create"}
	return []Resource{
		// core/v1
		{Version: "v1", Resource: "bindings", Kind: "Binding", Singular: "binding", Namespaced: true, Verbs: []string{"create"}, Prefix: "/registry/bindings"},
		{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Singular: "configmap", Namespaced: true, ShortNames: []string{"cm"}, Prefix: "/registry/configmaps"},
		{Version: "v1", Resource: "endpoints", Kind: "Endpoints", Singular: "endpoints", Namespaced: true, ShortNames: []string{"ep"}, Prefix: "/registry/services/endpoints"},
		{Version: "v1", Resource: "events", Kind: "Event", Singular: "event", Namespaced: true, ShortNames: []string{"ev"}, Prefix: "/registry/events",
			FieldSelectors: eventFieldNames, Fields: eventFields},
		{Version: "v1", Resource: "limitranges", Kind: "LimitRange", Singular: "limitrange", Namespaced: true, ShortNames: []string{"limits"}, Prefix: "/registry/limitranges"},
		{Version: "v1", Resource: "namespaces", Kind: "Namespace", Singular: "namespace", ShortNames: []string{"ns"}, Verbs: namespaceVerbs, Subresources: []string{"status", "finalize"}, Prefix: "/registry/namespaces",
			FieldSelectors: []string{"status.phase"}, Fields: namespaceFields},
		{Version: "v1", Resource: "nodes", Kind: "Node", Singular: "node", ShortNames: []string{"no"}, Subresources: []string{"status", "proxy"}, Prefix: "/registry/minions",
			FieldSelectors: []string{"spec.unschedulable"}, Fields: nodeFields},
		{Version: "v1", Resource: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", Singular: "persistentvolumeclaim", Namespaced: true, ShortNames: []string{"pvc"}, Subresources: []string{"status"}, Prefix: "/registry/persistentvolumeclaims"},
		{Version: "v1", Resource: "persistentvolumes", Kind: "PersistentVolume", Singular: "persistentvolume", ShortNames: []string{"pv"}, Subresources: []string{"status"}, Prefix: "/registry/persistentvolumes"},
		{Version: "v1", Resource: "pods", Kind: "Pod", Singular: "pod", Namespaced: true, ShortNames: []string{"po"}, Categories: all, Subresources: []string{"status", "binding", "eviction", "ephemeralcontainers", "resize", "log", "exec", "attach", "portforward", "proxy"}, Prefix: "/registry/pods",
			FieldSelectors: podFieldNames, Fields: podFields},
		{Version: "v1", Resource: "podtemplates", Kind: "PodTemplate", Singular: "podtemplate", Namespaced: true, Prefix: "/registry/podtemplates"},
		{Version: "v1", Resource: "replicationcontrollers", Kind: "ReplicationController", Singular: "replicationcontroller", Namespaced: true, ShortNames: []string{"rc"}, Categories: all, Subresources: []string{"status", "scale"}, Prefix: "/registry/controllers",
			FieldSelectors: []string{"status.replicas"}, Fields: replicationControllerFields},
		{Version: "v1", Resource: "resourcequotas", Kind: "ResourceQuota", Singular: "resourcequota", Namespaced: true, ShortNames: []string{"quota"}, Subresources: []string{"status"}, Prefix: "/registry/resourcequotas"},
		{Version: "v1", Resource: "secrets", Kind: "Secret", Singular: "secret", Namespaced: true, Prefix: "/registry/secrets",
			FieldSelectors: []string{"type"}, Fields: secretFields},
		{Version: "v1", Resource: "serviceaccounts", Kind: "ServiceAccount", Singular: "serviceaccount", Namespaced: true, ShortNames: []string{"sa"}, Subresources: []string{"token"}, Prefix: "/registry/serviceaccounts"},
		{Version: "v1", Resource: "services", Kind: "Service", Singular: "service", Namespaced: true, ShortNames: []string{"svc"}, Categories: all, Subresources: []string{"status", "proxy"}, Prefix: "/registry/services/specs"},

		// apps/v1
		{Group: "apps", Version: "v1", Resource: "controllerrevisions", Kind: "ControllerRevision", Singular: "controllerrevision", Namespaced: true, Prefix: "/registry/controllerrevisions"},
		{Group: "apps", Version: "v1", Resource: "daemonsets", Kind: "DaemonSet", Singular: "daemonset", Namespaced: true, ShortNames: []string{"ds"}, Categories: all, Subresources: []string{"status"}, Prefix: "/registry/daemonsets"},
		{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment", Singular: "deployment", Namespaced: true, ShortNames: []string{"deploy"}, Categories: all, Subresources: []string{"status", "scale"}, Prefix: "/registry/deployments"},
		{Group: "apps", Version: "v1", Resource: "replicasets", Kind: "ReplicaSet", Singular: "replicaset", Namespaced: true, ShortNames: []string{"rs"}, Categories: all, Subresources: []string{"status", "scale"}, Prefix: "/registry/replicasets"},
		{Group: "apps", Version: "v1", Resource: "statefulsets", Kind: "StatefulSet", Singular: "statefulset", Namespaced: true, ShortNames: []string{"sts"}, Categories: all, Subresources: []string{"status", "scale"}, Prefix: "/registry/statefulsets"},

		// Review APIs: created, answered, never stored (no prefix).
		{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews", Kind: "SelfSubjectReview", Singular: "selfsubjectreview", Verbs: create},
		{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews", Kind: "TokenReview", Singular: "tokenreview", Verbs: create},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "localsubjectaccessreviews", Kind: "LocalSubjectAccessReview", Singular: "localsubjectaccessreview", Namespaced: true, Verbs: create},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview", Singular: "selfsubjectaccessreview", Verbs: create},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews", Kind: "SelfSubjectRulesReview", Singular: "selfsubjectrulesreview", Verbs: create},
		{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews", Kind: "SubjectAccessReview", Singular: "subjectaccessreview", Verbs: create},

		// autoscaling
		{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers", Kind: "HorizontalPodAutoscaler", Singular: "horizontalpodautoscaler", Namespaced: true, ShortNames: []string{"hpa"}, Categories: all, Subresources: []string{"status"}, Prefix: "/registry/horizontalpodautoscalers"},

		// batch/v1
		{Group: "batch", Version: "v1", Resource: "cronjobs", Kind: "CronJob", Singular: "cronjob", Namespaced: true, ShortNames: []string{"cj"}, Categories: all, Subresources: []string{"status"}, Prefix: "/registry/cronjobs"},
		{Group: "batch", Version: "v1", Resource: "jobs", Kind: "Job", Singular: "job", Namespaced: true, Categories: all, Subresources: []string{"status"}, Prefix: "/registry/jobs",
			FieldSelectors: []string{"status.successful"}, Fields: jobFields},

		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Kind: "Lease", Singular: "lease", Namespaced: true, Prefix: "/registry/leases"},
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices", Kind: "EndpointSlice", Singular: "endpointslice", Namespaced: true, Prefix: "/registry/endpointslices"},
		{Group: "events.k8s.io", Version: "v1", Resource: "events", Kind: "Event", Singular: "event", Namespaced: true, ShortNames: []string{"ev"}, Prefix: "/registry/events",
			StorageKind:    corev1.SchemeGroupVersion.WithKind("Event"),
			FieldSelectors: eventFieldNames, Fields: eventFields, FieldLabels: eventsV1FieldLabels},

		{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses", Kind: "IngressClass", Singular: "ingressclass", Prefix: "/registry/ingressclasses"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses", Kind: "Ingress", Singular: "ingress", Namespaced: true, ShortNames: []string{"ing"}, Subresources: []string{"status"}, Prefix: "/registry/ingress"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies", Kind: "NetworkPolicy", Singular: "networkpolicy", Namespaced: true, ShortNames: []string{"netpol"}, Prefix: "/registry/networkpolicies"},

		{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets", Kind: "PodDisruptionBudget", Singular: "poddisruptionbudget", Namespaced: true, ShortNames: []string{"pdb"}, Subresources: []string{"status"}, Prefix: "/registry/poddisruptionbudgets"},

		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings", Kind: "ClusterRoleBinding", Singular: "clusterrolebinding", Prefix: "/registry/clusterrolebindings"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles", Kind: "ClusterRole", Singular: "clusterrole", Prefix: "/registry/clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings", Kind: "RoleBinding", Singular: "rolebinding", Namespaced: true, Prefix: "/registry/rolebindings"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles", Kind: "Role", Singular: "role", Namespaced: true, Prefix: "/registry/roles"},

		{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses", Kind: "PriorityClass", Singular: "priorityclass", ShortNames: []string{"pc"}, Prefix: "/registry/priorityclasses"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses", Kind: "StorageClass", Singular: "storageclass", ShortNames: []string{"sc"}, Prefix: "/registry/storageclasses"},

		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations", Kind: "MutatingWebhookConfiguration", Singular: "mutatingwebhookconfiguration", Categories: ext, Prefix: "/registry/mutatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations", Kind: "ValidatingWebhookConfiguration", Singular: "validatingwebhookconfiguration", Categories: ext, Prefix: "/registry/validatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies", Kind: "ValidatingAdmissionPolicy", Singular: "validatingadmissionpolicy", Categories: []string{"api-extensions"}, Subresources: []string{"status"}, Prefix: "/registry/validatingadmissionpolicies"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings", Kind: "ValidatingAdmissionPolicyBinding", Singular: "validatingadmissionpolicybinding", Categories: []string{"api-extensions"}, Prefix: "/registry/validatingadmissionpolicybindings"},

		// The rest of kube-apiserver's default resources (issue 13), each
		// with upstream's strategy in gateway/internal/builtin; the
		// discovery test (gateway/internal/discovery) checks them against
		// upstream's recording.
		{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests", Kind: "CertificateSigningRequest", Singular: "certificatesigningrequest", ShortNames: []string{"csr"}, Subresources: []string{"approval", "status"}, Prefix: "/registry/certificatesigningrequests",
			FieldSelectors: []string{"spec.signerName"}, Fields: csrFields},
		{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "flowschemas", Kind: "FlowSchema", Singular: "flowschema", Subresources: []string{"status"}, Prefix: "/registry/flowschemas"},
		{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "prioritylevelconfigurations", Kind: "PriorityLevelConfiguration", Singular: "prioritylevelconfiguration", Subresources: []string{"status"}, Prefix: "/registry/prioritylevelconfigurations"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "ipaddresses", Kind: "IPAddress", Singular: "ipaddress", ShortNames: []string{"ip"}, Prefix: "/registry/ipaddresses"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs", Kind: "ServiceCIDR", Singular: "servicecidr", Subresources: []string{"status"}, Prefix: "/registry/servicecidrs"},
		{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses", Kind: "RuntimeClass", Singular: "runtimeclass", Prefix: "/registry/runtimeclasses"},
		{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses", Kind: "DeviceClass", Singular: "deviceclass", Prefix: "/registry/deviceclasses"},
		{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims", Kind: "ResourceClaim", Singular: "resourceclaim", Namespaced: true, Subresources: []string{"status"}, Prefix: "/registry/resourceclaims"},
		{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates", Kind: "ResourceClaimTemplate", Singular: "resourceclaimtemplate", Namespaced: true, Prefix: "/registry/resourceclaimtemplates"},
		{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices", Kind: "ResourceSlice", Singular: "resourceslice", Prefix: "/registry/resourceslices",
			FieldSelectors: []string{"spec.nodeName", "spec.driver", "spec.pool.name"}, Fields: resourceSliceFields},
		{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers", Kind: "CSIDriver", Singular: "csidriver", Prefix: "/registry/csidrivers"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "csinodes", Kind: "CSINode", Singular: "csinode", Subresources: []string{"status"}, Prefix: "/registry/csinodes"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "csistoragecapacities", Kind: "CSIStorageCapacity", Singular: "csistoragecapacity", Namespaced: true, Prefix: "/registry/csistoragecapacities"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments", Kind: "VolumeAttachment", Singular: "volumeattachment", Subresources: []string{"status"}, Prefix: "/registry/volumeattachments"},
		{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattributesclasses", Kind: "VolumeAttributesClass", Singular: "volumeattributesclass", ShortNames: []string{"vac"}, Prefix: "/registry/volumeattributesclasses"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies", Kind: "MutatingAdmissionPolicy", Singular: "mutatingadmissionpolicy", Categories: ext, Prefix: "/registry/mutatingadmissionpolicies"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings", Kind: "MutatingAdmissionPolicyBinding", Singular: "mutatingadmissionpolicybinding", Categories: ext, Prefix: "/registry/mutatingadmissionpolicybindings"},
		{Group: "certificates.k8s.io", Version: "v1", Resource: "clustertrustbundles", Kind: "ClusterTrustBundle", Singular: "clustertrustbundle", Prefix: "/registry/clustertrustbundles",
			FieldSelectors: []string{"spec.signerName"}, Fields: clusterTrustBundleFields},
		{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests", Kind: "PodCertificateRequest", Singular: "podcertificaterequest", Namespaced: true, Subresources: []string{"status"}, Prefix: "/registry/podcertificaterequests",
			FieldSelectors: []string{"spec.signerName", "spec.podName", "spec.nodeName"}, Fields: podCertificateRequestFields},
		{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules", Kind: "DeviceTaintRule", Singular: "devicetaintrule", Subresources: []string{"status"}, Prefix: "/registry/devicetaintrules"},
		{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations", Kind: "StorageVersionMigration", Singular: "storageversionmigration", Subresources: []string{"status"}, Prefix: "/registry/storageversionmigrations"},

		// apiextensions-apiserver's CRD REST: short names and categories
		// as its ShortNames and Categories, kube-apiserver's key.
		{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions", Kind: "CustomResourceDefinition", Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"}, Categories: ext, Subresources: []string{"status"}, Prefix: "/registry/apiextensions.k8s.io/customresourcedefinitions"},

		// kube-aggregator's APIService REST: category api-extensions,
		// status subresource, kube-apiserver's key.
		{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices", Kind: "APIService", Singular: "apiservice", Categories: ext, Subresources: []string{"status"}, Prefix: "/registry/apiregistration.k8s.io/apiservices"},
	}
}

// namespaceVerbs: kube-apiserver serves no deletecollection of
// namespaces.
var namespaceVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}

var podFieldNames = []string{
	"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
	"spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
}

func podFields(obj runtime.Object) fields.Set {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return fields.Set{}
	}
	podIP := ""
	if len(p.Status.PodIPs) > 0 {
		podIP = p.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

var eventFieldNames = []string{
	"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
	"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
	"reason", "reportingComponent", "source", "type",
}

// eventFields are a core Event's fields; an events.k8s.io/v1 Event's
// are the same fields of the core Event it is stored as.
func eventFields(obj runtime.Object) fields.Set {
	e, ok := obj.(*corev1.Event)
	if !ok {
		v1, ok := obj.(*eventsv1.Event)
		if !ok {
			return fields.Set{}
		}
		e = &corev1.Event{InvolvedObject: v1.Regarding, Reason: v1.Reason, ReportingController: v1.ReportingController,
			Source: corev1.EventSource{Component: v1.DeprecatedSource.Component}, Type: v1.Type}
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         e.Source.Component,
		"type":                           e.Type,
	}
}

func namespaceFields(obj runtime.Object) fields.Set {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"status.phase": string(n.Status.Phase)}
}

func nodeFields(obj runtime.Object) fields.Set {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
}

func secretFields(obj runtime.Object) fields.Set {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"type": string(s.Type)}
}

// replicationControllerFields: core/v1 takes status.replicas (apps/v1
// ReplicaSets take no field label but the name and namespace).
func replicationControllerFields(obj runtime.Object) fields.Set {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"status.replicas": strconv.Itoa(int(rc.Status.Replicas))}
}

func clusterTrustBundleFields(obj runtime.Object) fields.Set {
	c, ok := obj.(*certificatesv1.ClusterTrustBundle)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"spec.signerName": c.Spec.SignerName}
}

func podCertificateRequestFields(obj runtime.Object) fields.Set {
	c, ok := obj.(*certificatesv1.PodCertificateRequest)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"spec.signerName": c.Spec.SignerName, "spec.podName": c.Spec.PodName, "spec.nodeName": string(c.Spec.NodeName)}
}

// eventsV1FieldLabels are the field labels of events.k8s.io/v1 Events and
// the core Event fields they select on, as upstream's events/v1
// conversion maps them: the objects are stored, and their fields
// computed, as core Events.
var eventsV1FieldLabels = map[string]string{
	"reason":                    "reason",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reportingController":       "reportingComponent",
	"type":                      "type",
}

func csrFields(obj runtime.Object) fields.Set {
	c, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"spec.signerName": c.Spec.SignerName}
}

func resourceSliceFields(obj runtime.Object) fields.Set {
	rs, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return fields.Set{}
	}
	node := ""
	if rs.Spec.NodeName != nil {
		node = *rs.Spec.NodeName
	}
	return fields.Set{"spec.nodeName": node, "spec.driver": rs.Spec.Driver, "spec.pool.name": rs.Spec.Pool.Name}
}

func jobFields(obj runtime.Object) fields.Set {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return fields.Set{}
	}
	return fields.Set{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
}
