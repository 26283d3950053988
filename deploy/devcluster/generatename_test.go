package devcluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

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
	"certificates.k8s.io/certificatesigningrequests": func(string) runtime.Object {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: minimalPKI().csrPEM, SignerName: "example.com/signer",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		}}
	},
	// Without a signerName a bundle's name may be any DNS subdomain
	// without ":" (a signer's bundles are named <signer with ":" for
	// "/">:<suffix>), so a generated name fits.
	"certificates.k8s.io/clustertrustbundles": func(string) runtime.Object {
		return &certificatesv1.ClusterTrustBundle{Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: minimalPKI().caPEM}}
	},
	// The pod, service account and node are only named: validation
	// checks the shape (and the stub request's key and signature), and
	// the node-restriction checks are admission's, which is not in the
	// create path these suites test.
	"certificates.k8s.io/podcertificaterequests": func(string) runtime.Object {
		return &certificatesv1.PodCertificateRequest{Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: "example.com/signer",
			PodName:    "p", PodUID: "11111111-1111-1111-1111-111111111111",
			ServiceAccountName: "default", ServiceAccountUID: "22222222-2222-2222-2222-222222222222",
			NodeName: "n", NodeUID: "33333333-3333-3333-3333-333333333333",
			MaxExpirationSeconds: ptr.To[int32](86400),
			StubPKCS10Request:    minimalPKI().csrDER,
		}}
	},
	"flowcontrol.apiserver.k8s.io/flowschemas": func(string) runtime.Object {
		return &flowcontrolv1.FlowSchema{Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
			MatchingPrecedence:         1000,
		}}
	},
	"flowcontrol.apiserver.k8s.io/prioritylevelconfigurations": func(string) runtime.Object {
		return &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		}}
	},
	"resource.k8s.io/resourceclaims": func(string) runtime.Object {
		return &resourcev1.ResourceClaim{Spec: minimalClaimSpec()}
	},
	"resource.k8s.io/resourceclaimtemplates": func(string) runtime.Object {
		return &resourcev1.ResourceClaimTemplate{Spec: resourcev1.ResourceClaimTemplateSpec{Spec: minimalClaimSpec()}}
	},
	"resource.k8s.io/resourceslices": func(string) runtime.Object {
		return &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
			Driver: "gen.example.com", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}, AllNodes: ptr.To(true),
		}}
	},
	"resource.k8s.io/devicetaintrules": func(string) runtime.Object {
		return &resourcev1.DeviceTaintRule{Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gen.example.com")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/gen", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		}}
	},
	// A CSINode is named after its node, but create takes any DNS
	// subdomain (the node need not exist), so a generated name fits.
	"storage.k8s.io/csinodes": func(string) runtime.Object { return &storagev1.CSINode{} },
	"storage.k8s.io/csistoragecapacities": func(string) runtime.Object {
		return &storagev1.CSIStorageCapacity{StorageClassName: "gen"}
	},
	"storage.k8s.io/volumeattachments": func(string) runtime.Object {
		return &storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "gen.example.com", NodeName: "n",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv")},
		}}
	},
	"admissionregistration.k8s.io/mutatingadmissionpolicies": func(string) runtime.Object {
		return &admissionregistrationv1.MutatingAdmissionPolicy{Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "Object{}"},
			}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		}}
	},
	"admissionregistration.k8s.io/mutatingadmissionpolicybindings": func(string) runtime.Object {
		return &admissionregistrationv1.MutatingAdmissionPolicyBinding{Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "gen-policy"}}
	},
	"storagemigration.k8s.io/storageversionmigrations": func(string) runtime.Object {
		return &storagemigrationv1.StorageVersionMigration{Spec: storagemigrationv1.StorageVersionMigrationSpec{
			Resource: metav1.GroupResource{Resource: "configmaps"},
		}}
	},
}

// minimalClaimSpec asks for one device of a class; the class need not
// exist for the claim to be valid.
func minimalClaimSpec() resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gen"},
	}}}}
}

// minimalPKIData is the key material of the certificate kinds' minimal
// objects: a PKCS#10 request (PEM for a CSR, DER for a
// PodCertificateRequest's stub) and a self-signed CA certificate (PEM,
// for a ClusterTrustBundle), all ECDSA P-256.
type minimalPKIData struct {
	csrPEM, csrDER []byte
	caPEM          string
}

// minimalPKI makes the key material once per test binary.
var minimalPKI = sync.OnceValue(func() minimalPKIData {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "gen"}}, key)
	if err != nil {
		panic(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gen-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	ca, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return minimalPKIData{
		csrPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}),
		csrDER: csr,
		caPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca})),
	}
})

// noMinimalObject lists stored resources the generateName and
// invalid-object suites leave out, by name, each with the reason no
// object with a generated name can be valid. An entry that has a minimal
// object fails the test.
var noMinimalObject = map[string]bool{
	// An IPAddress's name is the address itself, in canonical form
	// ("10.0.0.1", "2001:db8::1"; networking validation's
	// ValidateIPAddressName, which ignores its prefix argument, so
	// metadata.generateName must itself be an IP), and generateName
	// appends five random alphanumerics to it, which is never an IP:
	// upstream cannot generate a valid IPAddress name, so there is no
	// object to generate a name for.
	"networking.k8s.io/ipaddresses": true,
	// An APIService's name must be exactly <spec.version>.<spec.group>
	// (kube-aggregator's ValidateAPIService), so a name with five random
	// characters appended is never valid either. The aggregator's own
	// tests cover its validation.
	"apiregistration.k8s.io/apiservices": true,
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
			t.Logf("%s: no valid object with a generated name (noMinimalObject)", key)
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
