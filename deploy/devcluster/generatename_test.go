package devcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/storage/registry"
)

// minimalLabels are the labels of the minimal workloads and their
// templates.
var minimalLabels = map[string]string{"app": "gen"}

func minimalPodSpec(restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}
}

func minimalTemplate(restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: minimalLabels}, Spec: minimalPodSpec(restart)}
}

// minimalObjects holds, per served resource (group/resource), the
// smallest object upstream's validation accepts, in namespace ns (ignored
// for cluster-scoped kinds). TestGenerateNameEveryKind fails for a served
// resource without an entry.
var minimalObjects = map[string]func(ns string) runtime.Object{
	"/configmaps": func(string) runtime.Object { return &corev1.ConfigMap{} },
	"/endpoints":  func(string) runtime.Object { return &corev1.Endpoints{} },
	"/events": func(ns string) runtime.Object {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "x"}, Reason: "Test", Message: "m", Type: corev1.EventTypeNormal}
	},
	"/limitranges": func(string) runtime.Object {
		return &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		}}}}
	},
	"/namespaces": func(string) runtime.Object { return &corev1.Namespace{} },
	"/nodes":      func(string) runtime.Object { return &corev1.Node{} },
	"/persistentvolumeclaims": func(string) runtime.Object {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
	},
	"/persistentvolumes": func(string) runtime.Object {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/gen"}},
		}}
	},
	"/pods":         func(string) runtime.Object { return &corev1.Pod{Spec: minimalPodSpec("")} },
	"/podtemplates": func(string) runtime.Object { return &corev1.PodTemplate{Template: minimalTemplate("")} },
	"/replicationcontrollers": func(string) runtime.Object {
		t := minimalTemplate("")
		return &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Selector: minimalLabels, Template: &t}}
	},
	"/resourcequotas":  func(string) runtime.Object { return &corev1.ResourceQuota{} },
	"/secrets":         func(string) runtime.Object { return &corev1.Secret{} },
	"/serviceaccounts": func(string) runtime.Object { return &corev1.ServiceAccount{} },
	"/services": func(string) runtime.Object {
		return &corev1.Service{Spec: corev1.ServiceSpec{Selector: minimalLabels, Ports: []corev1.ServicePort{{Port: 80}}}}
	},
	"apps/controllerrevisions": func(string) runtime.Object {
		return &appsv1.ControllerRevision{Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{}`)}}
	},
	"apps/daemonsets": func(string) runtime.Object {
		return &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: minimalLabels}, Template: minimalTemplate("")}}
	},
	"apps/deployments": func(string) runtime.Object {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: minimalLabels}, Template: minimalTemplate("")}}
	},
	"apps/replicasets": func(string) runtime.Object {
		return &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: minimalLabels}, Template: minimalTemplate("")}}
	},
	"apps/statefulsets": func(string) runtime.Object {
		return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: minimalLabels}, Template: minimalTemplate("")}}
	},
	"autoscaling/horizontalpodautoscalers": func(string) runtime.Object {
		return &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}, MaxReplicas: 2,
		}}
	},
	"batch/cronjobs": func(string) runtime.Object {
		return &batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: minimalTemplate(corev1.RestartPolicyNever)},
		}}}
	},
	"batch/jobs": func(string) runtime.Object {
		return &batchv1.Job{Spec: batchv1.JobSpec{Template: minimalTemplate(corev1.RestartPolicyNever)}}
	},
	"coordination.k8s.io/leases": func(string) runtime.Object { return &coordinationv1.Lease{} },
	"discovery.k8s.io/endpointslices": func(string) runtime.Object {
		return &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	},
	"events.k8s.io/events": func(ns string) runtime.Object {
		return &eventsv1.Event{
			EventTime: metav1.NewMicroTime(time.Now()), ReportingController: "example.com/gen", ReportingInstance: "gen-1",
			Action: "Test", Reason: "Test", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "x"},
		}
	},
	"networking.k8s.io/ingressclasses": func(string) runtime.Object {
		return &networkingv1.IngressClass{Spec: networkingv1.IngressClassSpec{Controller: "example.com/ingress"}}
	},
	"networking.k8s.io/ingresses": func(string) runtime.Object {
		return &networkingv1.Ingress{Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Number: 80}},
		}}}
	},
	"networking.k8s.io/networkpolicies": func(string) runtime.Object { return &networkingv1.NetworkPolicy{} },
	"policy/poddisruptionbudgets":       func(string) runtime.Object { return &policyv1.PodDisruptionBudget{} },
	"rbac.authorization.k8s.io/clusterrolebindings": func(string) runtime.Object {
		return &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}
	},
	"rbac.authorization.k8s.io/clusterroles": func(string) runtime.Object { return &rbacv1.ClusterRole{} },
	"rbac.authorization.k8s.io/rolebindings": func(string) runtime.Object {
		return &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}
	},
	"rbac.authorization.k8s.io/roles":   func(string) runtime.Object { return &rbacv1.Role{} },
	"scheduling.k8s.io/priorityclasses": func(string) runtime.Object { return &schedulingv1.PriorityClass{Value: 1000} },
	"storage.k8s.io/storageclasses":     func(string) runtime.Object { return &storagev1.StorageClass{Provisioner: "example.com/gen"} },
	"storage.k8s.io/csidrivers":         func(string) runtime.Object { return &storagev1.CSIDriver{} },
	"storage.k8s.io/volumeattributesclasses": func(string) runtime.Object {
		return &storagev1.VolumeAttributesClass{DriverName: "example.com/gen", Parameters: map[string]string{"iops": "100"}}
	},
	"node.k8s.io/runtimeclasses":    func(string) runtime.Object { return &nodev1.RuntimeClass{Handler: "runc"} },
	"resource.k8s.io/deviceclasses": func(string) runtime.Object { return &resourcev1.DeviceClass{} },
	"networking.k8s.io/servicecidrs": func(string) runtime.Object {
		return &networkingv1.ServiceCIDR{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.250.0.0/24"}}}
	},
	"admissionregistration.k8s.io/mutatingwebhookconfigurations": func(string) runtime.Object {
		return &admissionregistrationv1.MutatingWebhookConfiguration{}
	},
	"admissionregistration.k8s.io/validatingwebhookconfigurations": func(string) runtime.Object {
		return &admissionregistrationv1.ValidatingWebhookConfiguration{}
	},
	"admissionregistration.k8s.io/validatingadmissionpolicies": func(string) runtime.Object {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
		}}
	},
	"admissionregistration.k8s.io/validatingadmissionpolicybindings": func(string) runtime.Object {
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "gen-policy", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		}}
	},
}

// noMinimalObject lists stored resources added for issue 13 whose minimal
// valid object is not written yet; the generateName and invalid-object
// suites leave them out, by name, until it is (TODO(issue 13): a CSR needs
// a PEM request, an IPAddress an IP for a name, a ClusterTrustBundle a
// certificate, ...). An entry that has a minimal object fails the test.
var noMinimalObject = map[string]bool{
	"certificates.k8s.io/certificatesigningrequests":               true,
	"certificates.k8s.io/clustertrustbundles":                      true,
	"certificates.k8s.io/podcertificaterequests":                   true,
	"flowcontrol.apiserver.k8s.io/flowschemas":                     true,
	"flowcontrol.apiserver.k8s.io/prioritylevelconfigurations":     true,
	"networking.k8s.io/ipaddresses":                                true,
	"resource.k8s.io/resourceclaims":                               true,
	"resource.k8s.io/resourceclaimtemplates":                       true,
	"resource.k8s.io/resourceslices":                               true,
	"resource.k8s.io/devicetaintrules":                             true,
	"storage.k8s.io/csinodes":                                      true,
	"storage.k8s.io/csistoragecapacities":                          true,
	"storage.k8s.io/volumeattachments":                             true,
	"admissionregistration.k8s.io/mutatingadmissionpolicies":       true,
	"admissionregistration.k8s.io/mutatingadmissionpolicybindings": true,
	"storagemigration.k8s.io/storageversionmigrations":             true,
}

// storedResources are the served built-in resources objects are created
// in (create-only ones, the reviews and bindings, are never stored and
// have no name to generate). CustomResourceDefinitions are left out: they
// are apiextensions-apiserver's, in neither client-go's kubernetes scheme
// nor k8s.io/kubernetes's legacyscheme these tests build objects and
// upstream's answers with, and their name is fixed by their spec
// (<plural>.<group>), so upstream rejects a generated one; builtin's
// TestCRDCreate (against upstream's validation) and TestCRDAPI cover them.
func storedResources() []registry.Resource {
	var out []registry.Resource
	for _, r := range registry.Builtin() {
		if !r.CreateOnly() && r.Group != "apiextensions.k8s.io" {
			out = append(out, r)
		}
	}
	return out
}

// typedClient is a REST client for gv as client-go's typed clientsets
// (and kube-controller-manager) make them: the client-go scheme's
// serializers, bodies in contentType.
func typedClient(t *testing.T, c *devcluster.Cluster, gv schema.GroupVersion, contentType string) rest.Interface {
	t.Helper()
	cfg := rest.CopyConfig(restConfig(t, c, false, nil))
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cfg.ContentType, cfg.AcceptContentTypes = contentType, contentType
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestGenerateNameEveryKind creates, for every stored built-in resource,
// a minimal object with only metadata.generateName, as JSON and as
// protobuf through client-go's REST client: upstream generates the name
// before it validates, so each is created with a generated name.
func TestGenerateNameEveryKind(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	ns := uniqueNS("gen")
	ensureNamespace(t, cs, ns)
	ctx := context.Background()
	formats := []struct{ name, contentType string }{
		{"json", runtime.ContentTypeJSON},
		{"protobuf", runtime.ContentTypeProtobuf},
	}
	seen := 0
	for _, res := range storedResources() {
		key := res.Group + "/" + res.Resource
		newObj, ok := minimalObjects[key]
		if noMinimalObject[key] {
			if ok {
				t.Errorf("%s has a minimal object: remove it from noMinimalObject", key)
			}
			t.Logf("%s: no minimal object yet (noMinimalObject)", key)
			continue
		}
		if !ok {
			t.Errorf("%s is served but has no minimal object: add one to minimalObjects", key)
			continue
		}
		seen++
		for _, f := range formats {
			t.Run(key+"/"+f.name, func(t *testing.T) {
				rc := typedClient(t, c, res.GVR().GroupVersion(), f.contentType)
				obj := newObj(ns)
				m, err := meta.Accessor(obj)
				if err != nil {
					t.Fatal(err)
				}
				prefix := "gen-" + f.name + "-"
				m.SetGenerateName(prefix)
				req := rc.Post().Resource(res.Resource)
				if res.Namespaced {
					req = req.Namespace(ns)
				}
				into, err := scheme.Scheme.New(res.GVK())
				if err != nil {
					t.Fatal(err)
				}
				if err := req.Body(obj).Do(ctx).Into(into); err != nil {
					t.Fatalf("create with generateName %q: %v", prefix, err)
				}
				got, err := meta.Accessor(into)
				if err != nil {
					t.Fatal(err)
				}
				name := got.GetName()
				if !strings.HasPrefix(name, prefix) || len(name) <= len(prefix) || got.GetGenerateName() != prefix || got.GetUID() == "" {
					t.Fatalf("created name %q generateName %q uid %q, want a name generated from %q", name, got.GetGenerateName(), got.GetUID(), prefix)
				}
				del := rc.Delete().Resource(res.Resource).Name(name)
				if res.Namespaced {
					del = del.Namespace(ns)
				}
				if err := del.Do(ctx).Error(); err != nil {
					t.Errorf("delete %s: %v", name, err)
				}
			})
		}
	}
	for key := range minimalObjects {
		found := false
		for _, res := range storedResources() {
			found = found || res.Group+"/"+res.Resource == key
		}
		if !found {
			t.Errorf("minimalObjects has %s, which is not served", key)
		}
	}
	if seen < 30 {
		t.Errorf("%d kinds created with generateName, want every stored built-in kind (at least 30)", seen)
	}
}

// TestGenerateNameTypedClients creates what kube-controller-manager's
// controllers create with generated names, through the typed clientset
// (protobuf, its default): a ReplicaSet's Pod and a CronJob's Job.
func TestGenerateNameTypedClients(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, false, nil)
	ns := uniqueNS("gentyped")
	ensureNamespace(t, clientset(t, c, true, nil), ns)
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-5d8f7c9b6d-", Labels: minimalLabels},
		Spec:       minimalPodSpec(""),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod: %v", err)
	}
	if !strings.HasPrefix(pod.Name, "web-5d8f7c9b6d-") || len(pod.Name) != len("web-5d8f7c9b6d-")+5 {
		t.Errorf("pod name %q, want web-5d8f7c9b6d- and 5 random characters", pod.Name)
	}
	// Upstream's defaults and pod strategy ran.
	if pod.Spec.TerminationGracePeriodSeconds == nil || pod.Spec.DNSPolicy != corev1.DNSClusterFirst || pod.Status.Phase != corev1.PodPending {
		t.Errorf("pod not defaulted and prepared as upstream: grace %v dns %q phase %q", pod.Spec.TerminationGracePeriodSeconds, pod.Spec.DNSPolicy, pod.Status.Phase)
	}
	job, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "backup-"},
		Spec:       batchv1.JobSpec{Template: minimalTemplate(corev1.RestartPolicyNever)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	// The job strategy's generated selector names the job's own uid.
	if !strings.HasPrefix(job.Name, "backup-") || job.Spec.Selector == nil || job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != string(job.UID) {
		t.Errorf("job %q uid %s selector %v, want a generated name and a selector naming its uid", job.Name, job.UID, job.Spec.Selector)
	}
}
