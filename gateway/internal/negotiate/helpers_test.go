package negotiate

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kgate/kgate/storage/registry"
)

// fixture holds the scheme and apimachinery's own serializers, the
// reference every test compares with.
type fixture struct {
	scheme *runtime.Scheme
	codec  *Codec
	json   *json.Serializer // compact JSON, one object per call
	yaml   *json.Serializer
	pretty *json.Serializer
	proto  *protobuf.Serializer
	raw    *protobuf.RawSerializer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	s, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCodec(s)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{
		scheme: s,
		codec:  c,
		json:   json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{}),
		yaml:   json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true}),
		pretty: json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Pretty: true}),
		proto:  protobuf.NewSerializer(s, s),
		raw:    protobuf.NewRawSerializer(s, s),
	}
}

// encode encodes obj with an apimachinery encoder.
func encode(t testing.TB, e runtime.Encoder, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := e.Encode(obj, &buf); err != nil {
		t.Fatalf("cannot encode %T: %v", obj, err)
	}
	return buf.Bytes()
}

// served returns what the cache node keeps for obj: its JSON with
// apiVersion and kind (no trailing newline) and its bare protobuf message.
func (f *fixture) served(t testing.TB, obj runtime.Object) (jsonBytes, raw []byte) {
	t.Helper()
	obj = obj.DeepCopyObject()
	kinds, _, err := f.scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(kinds[0])
	jsonBytes = bytes.TrimRight(encode(t, f.json, obj), "\n")
	raw = encode(t, f.raw, obj)
	return jsonBytes, raw
}

// bigPod returns a pod of about 4.7 KB as JSON, like a real workload pod.
func bigPod(i int) *corev1.Pod {
	name := fmt.Sprintf("web-7c5ddbdf54-%05d", i)
	labels := map[string]string{
		"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": "web-prod",
		"app.kubernetes.io/version": "1.25.3", "pod-template-hash": "7c5ddbdf54", "tier": "frontend",
	}
	container := func(n string) corev1.Container {
		return corev1.Container{
			Name:            n,
			Image:           "registry.example.com/team/" + n + ":1.25.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			Command:         []string{"/bin/" + n, "--config=/etc/" + n + "/config.yaml", "--log-level=info"},
			Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env:             []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}, {Name: "MODE", Value: "production"}, {Name: "CACHE_SIZE", Value: "512Mi"}},
			Resources:       corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
			VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + n}, {Name: "kube-api-access-x2x9z", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			LivenessProbe:   &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}}, InitialDelaySeconds: 10, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
			ReadinessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}}, TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3},
			ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}
	}
	now := metav1.Unix(1700000000, 0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: "8f0e7c7a-5b43-4a8e-9a0e-1c2d3e4f5a6b",
			ResourceVersion: fmt.Sprint(100000 + i), GenerateName: "web-7c5ddbdf54-",
			CreationTimestamp: now, Labels: labels,
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7c5ddbdf54", UID: "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0a1b2c3d\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}`)}}},
		},
		Spec: corev1.PodSpec{
			Containers:         []corev1.Container{container("web"), container("sidecar")},
			Volumes:            []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}},
			RestartPolicy:      corev1.RestartPolicyAlways,
			DNSPolicy:          corev1.DNSClusterFirst,
			ServiceAccountName: "web", NodeName: fmt.Sprintf("node-%03d", i%100), SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.12", PodIP: "10.244.1.17", PodIPs: []corev1.PodIP{{IP: "10.244.1.17"}},
			StartTime: &now, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "web", Ready: true, Image: "registry.example.com/team/web:1.25.3", ImageID: "registry.example.com/team/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}},
				{Name: "sidecar", Ready: true, Image: "registry.example.com/team/sidecar:1.25.3", ImageID: "registry.example.com/team/sidecar@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ContainerID: "containerd://fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}},
			},
		},
	}
}
