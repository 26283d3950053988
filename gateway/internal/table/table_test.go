package table

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
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
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	cliprinters "k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage/registry"
)

// now is the reference time of the fixtures: upstream's printers compute
// ages from the wall clock.
var now = time.Now()

var newConverter = sync.OnceValues(func() (*Converter, error) {
	sem, err := builtin.New(nil)
	if err != nil {
		return nil, err
	}
	return New(sem.Scheme())
})

// converter returns the package's converter, built once for the tests.
func converter(t *testing.T) *Converter {
	t.Helper()
	c, err := newConverter()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func objMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: ago(5 * time.Hour)}
}

func lookup(t *testing.T, group, version, resource string) *registry.Resource {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Lookup(schema.GroupVersionResource{Group: group, Version: version, Resource: resource})
	if !ok {
		t.Fatalf("no resource %s/%s %s", group, version, resource)
	}
	return res
}

func TestColumns(t *testing.T) {
	type col struct {
		name     string
		priority int32
	}
	f := func(group, version, resource string, want ...col) {
		t.Helper()
		tbl, err := converter(t).Convert(nil, lookup(t, group, version, resource), "")
		if err != nil {
			t.Fatal(err)
		}
		var got []col
		for _, c := range tbl.ColumnDefinitions {
			got = append(got, col{c.Name, c.Priority})
			if c.Description == "" && c.Name != "Created At" {
				t.Errorf("%s column %s has no description", resource, c.Name)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s columns = %v, want %v", resource, got, want)
		}
		if len(tbl.Rows) != 0 {
			t.Errorf("%s rows = %#v, want empty", resource, tbl.Rows)
		}
	}
	f("", "v1", "pods", col{"Name", 0}, col{"Ready", 0}, col{"Status", 0}, col{"Restarts", 0}, col{"Age", 0},
		col{"IP", 1}, col{"Node", 1}, col{"Nominated Node", 1}, col{"Readiness Gates", 1})
	f("apps", "v1", "deployments", col{"Name", 0}, col{"Ready", 0}, col{"Up-to-date", 0}, col{"Available", 0}, col{"Age", 0},
		col{"Containers", 1}, col{"Images", 1}, col{"Selector", 1})
	f("", "v1", "services", col{"Name", 0}, col{"Type", 0}, col{"Cluster-IP", 0}, col{"External-IP", 0}, col{"Port(s)", 0}, col{"Age", 0}, col{"Selector", 1})
	f("", "v1", "configmaps", col{"Name", 0}, col{"Data", 0}, col{"Age", 0})
	f("", "v1", "secrets", col{"Name", 0}, col{"Type", 0}, col{"Data", 0}, col{"Age", 0})
	f("", "v1", "namespaces", col{"Name", 0}, col{"Status", 0}, col{"Age", 0})
	f("", "v1", "events", col{"Last Seen", 0}, col{"Type", 0}, col{"Reason", 0}, col{"Object", 0}, col{"Subobject", 1}, col{"Source", 1},
		col{"Message", 0}, col{"First Seen", 1}, col{"Count", 1}, col{"Name", 1})
	f("batch", "v1", "jobs", col{"Name", 0}, col{"Status", 0}, col{"Completions", 0}, col{"Duration", 0}, col{"Age", 0},
		col{"Containers", 1}, col{"Images", 1}, col{"Selector", 1})
	f("rbac.authorization.k8s.io", "v1", "roles", col{"Name", 0}, col{"Created At", 0})
	f("", "v1", "limitranges", col{"Name", 0}, col{"Created At", 0})
}

// TestEveryResource converts an empty object of every built-in resource.
func TestEveryResource(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range reg.Resources() {
		obj, err := reg.New(res)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := converter(t).ConvertObject(obj, res, "Metadata")
		if err != nil {
			t.Errorf("%s: %v", res.GVR(), err)
			continue
		}
		// Upstream's IPAddress printer (v1.37.2) appends an Age cell it
		// declares no column for; kube-apiserver serves the same table.
		extra := 0
		if res.Group == "networking.k8s.io" && res.Resource == "ipaddresses" {
			extra = 1
		}
		if len(tbl.Rows[0].Cells) != len(tbl.ColumnDefinitions)+extra {
			t.Errorf("%s: %d cells for %d columns", res.GVR(), len(tbl.Rows[0].Cells), len(tbl.ColumnDefinitions))
		}
	}
}

func TestCells(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	restartedAt := func(d time.Duration) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: ago(d)}}
	}
	two := []corev1.Container{{Name: "app", Image: "nginx:1"}, {Name: "log", Image: "fluentd"}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	always := corev1.ContainerRestartPolicyAlways

	tests := []struct {
		name     string
		resource [3]string
		obj      runtime.Object
	}{
		{"pod running", [3]string{"", "v1", "pods"}, &corev1.Pod{
			ObjectMeta: objMeta("p"),
			Spec:       corev1.PodSpec{Containers: two, NodeName: "node-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}},
				ContainerStatuses: []corev1.ContainerStatus{
					{Ready: true, RestartCount: 3, State: running, LastTerminationState: restartedAt(5 * 24 * time.Hour)},
					{Ready: true, State: running},
				}},
		}},
		{"pod waiting", [3]string{"", "v1", "pods"}, &corev1.Pod{
			ObjectMeta: objMeta("p"),
			Spec:       corev1.PodSpec{Containers: two},
			Status: corev1.PodStatus{Phase: "podPhase", ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: running},
				{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, RestartCount: 3},
			}},
		}},
		{"pod completed with a running container, not ready", [3]string{"", "v1", "pods"}, &corev1.Pod{
			ObjectMeta: objMeta("p"),
			Spec:       corev1.PodSpec{Containers: two},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
				{Ready: true, RestartCount: 3, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
				{Ready: true, RestartCount: 3, State: running},
			}},
		}},
		{"pod initializing", [3]string{"", "v1", "pods"}, &corev1.Pod{
			ObjectMeta: objMeta("p"),
			Spec:       corev1.PodSpec{InitContainers: make([]corev1.Container, 2), Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: corev1.PodPending,
				InitContainerStatuses: []corev1.ContainerStatus{
					{RestartCount: 2, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}, LastTerminationState: restartedAt(2 * time.Minute)},
					{RestartCount: 3, State: running, LastTerminationState: restartedAt(10 * time.Second)},
				},
				ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}},
			},
		}},
		{"pod with a sidecar", [3]string{"", "v1", "pods"}, &corev1.Pod{
			ObjectMeta: objMeta("p"),
			Spec:       corev1.PodSpec{InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: &always}}, Containers: make([]corev1.Container, 1)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:            []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "sidecar", Ready: true, Started: ptr.To(true), RestartCount: 1, State: running, LastTerminationState: restartedAt(time.Minute)}},
				ContainerStatuses:     []corev1.ContainerStatus{{Ready: true, State: running}},
			},
		}},
		{"pod terminating with gates", [3]string{"", "v1", "pods"}, &corev1.Pod{
			ObjectMeta: func() metav1.ObjectMeta { m := objMeta("p"); m.DeletionTimestamp = ptr.To(ago(time.Second)); return m }(),
			Spec:       corev1.PodSpec{Containers: make([]corev1.Container, 1), ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "a"}, {ConditionType: "b"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, NominatedNodeName: "node-2",
				Conditions: []corev1.PodCondition{{Type: "a", Status: corev1.ConditionTrue}, {Type: "b", Status: corev1.ConditionFalse}}},
		}},
		{"pod scheduling gated", [3]string{"", "v1", "pods"}, &corev1.Pod{
			ObjectMeta: objMeta("p"),
			Spec:       corev1.PodSpec{Containers: make([]corev1.Container, 2)},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}},
		}},
		{"deployment", [3]string{"apps", "v1", "deployments"}, &appsv1.Deployment{
			ObjectMeta: objMeta("web"),
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: selector, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: two}}},
			Status:     appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2},
		}},
		{"replicaset", [3]string{"apps", "v1", "replicasets"}, &appsv1.ReplicaSet{
			ObjectMeta: objMeta("web-1"),
			Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: selector, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: two[:1]}}},
			Status:     appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1},
		}},
		{"statefulset", [3]string{"apps", "v1", "statefulsets"}, &appsv1.StatefulSet{
			ObjectMeta: objMeta("db"),
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: two[:1]}}},
			Status:     appsv1.StatefulSetStatus{ReadyReplicas: 1},
		}},
		{"daemonset", [3]string{"apps", "v1", "daemonsets"}, &appsv1.DaemonSet{
			ObjectMeta: objMeta("agent"),
			Spec: appsv1.DaemonSetSpec{Selector: selector, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: two[:1], NodeSelector: map[string]string{"kubernetes.io/os": "linux"}}}},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2},
		}},
		{"controllerrevision", [3]string{"apps", "v1", "controllerrevisions"}, &appsv1.ControllerRevision{
			ObjectMeta: func() metav1.ObjectMeta {
				m := objMeta("db-5d8f")
				m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}
				return m
			}(),
			Revision: 4,
		}},
		{"job running", [3]string{"batch", "v1", "jobs"}, &batchv1.Job{
			ObjectMeta: objMeta("j"),
			Spec:       batchv1.JobSpec{Completions: ptr.To[int32](3), Selector: selector, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: two[:1]}}},
			Status:     batchv1.JobStatus{Succeeded: 1, StartTime: ptr.To(ago(90 * time.Second))},
		}},
		{"job complete", [3]string{"batch", "v1", "jobs"}, &batchv1.Job{
			ObjectMeta: objMeta("j"),
			Spec:       batchv1.JobSpec{Parallelism: ptr.To[int32](2)},
			Status: batchv1.JobStatus{Succeeded: 1, StartTime: ptr.To(ago(time.Hour)), CompletionTime: ptr.To(ago(time.Hour - 30*time.Second)),
				Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}},
		}},
		{"cronjob", [3]string{"batch", "v1", "cronjobs"}, &batchv1.CronJob{
			ObjectMeta: objMeta("cj"),
			Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", Suspend: ptr.To(false), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: two[:1]}}}}},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{}}, LastScheduleTime: ptr.To(ago(3 * time.Minute))},
		}},
		{"service cluster ip", [3]string{"", "v1", "services"}, &corev1.Service{
			ObjectMeta: objMeta("svc"),
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.96.0.10"}, Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 53, Protocol: "UDP"}, {Port: 53, Protocol: "TCP"}}},
		}},
		{"service load balancer", [3]string{"", "v1", "services"}, &corev1.Service{
			ObjectMeta: objMeta("lb"),
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"1.5.6.7"},
				Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
				{IP: "3.4.5.6"}, {IP: "2.3.4.5"}, {Hostname: "lb.example.com"}}}},
		}},
		{"service pending", [3]string{"", "v1", "services"}, &corev1.Service{
			ObjectMeta: objMeta("lb"),
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		}},
		{"service external name", [3]string{"", "v1", "services"}, &corev1.Service{
			ObjectMeta: objMeta("ext"),
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
		}},
		{"configmap", [3]string{"", "v1", "configmaps"}, &corev1.ConfigMap{
			ObjectMeta: objMeta("cm"), Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": nil},
		}},
		{"secret", [3]string{"", "v1", "secrets"}, &corev1.Secret{
			ObjectMeta: objMeta("s"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": nil},
		}},
		{"namespace", [3]string{"", "v1", "namespaces"}, &corev1.Namespace{
			ObjectMeta: objMeta("default"), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		}},
		{"serviceaccount", [3]string{"", "v1", "serviceaccounts"}, &corev1.ServiceAccount{ObjectMeta: objMeta("default")}},
		{"node", [3]string{"", "v1", "nodes"}, &corev1.Node{
			ObjectMeta: func() metav1.ObjectMeta {
				m := objMeta("n1")
				m.Labels = map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}
				return m
			}(),
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.2"}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian", ContainerRuntimeVersion: "containerd://2.1"},
			},
		}},
		{"node not ready", [3]string{"", "v1", "nodes"}, &corev1.Node{
			ObjectMeta: objMeta("n2"),
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
		}},
		{"event", [3]string{"", "v1", "events"}, &corev1.Event{
			ObjectMeta:     objMeta("web.17a"),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1", FieldPath: "spec.containers{app}"},
			Reason:         "Pulled", Message: "Pulled image \n", Type: "Normal", Count: 4,
			Source:         corev1.EventSource{Component: "kubelet", Host: "n1"},
			FirstTimestamp: ago(time.Hour), LastTimestamp: ago(time.Minute),
		}},
		{"events.k8s.io event", [3]string{"events.k8s.io", "v1", "events"}, &eventsv1.Event{
			ObjectMeta: objMeta("web.17b"),
			Regarding:  corev1.ObjectReference{Kind: "Deployment", Name: "web"},
			Reason:     "ScalingReplicaSet", Note: "Scaled up", Type: "Normal",
			EventTime:           metav1.NewMicroTime(now.Add(-5 * time.Minute)),
			ReportingController: "deployment-controller",
			Series:              &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(now.Add(-30 * time.Second))},
		}},
		{"endpoints", [3]string{"", "v1", "endpoints"}, &corev1.Endpoints{
			ObjectMeta: objMeta("svc"),
			Subsets: []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}},
				Ports:     []corev1.EndpointPort{{Port: 80}, {Port: 443}},
			}},
		}},
		{"endpoints none", [3]string{"", "v1", "endpoints"}, &corev1.Endpoints{ObjectMeta: objMeta("svc")}},
		{"endpointslice", [3]string{"discovery.k8s.io", "v1", "endpointslices"}, &discoveryv1.EndpointSlice{
			ObjectMeta:  objMeta("svc-abc"),
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Name: ptr.To("https")}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}, {Addresses: []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}}},
		}},
		{"pvc bound", [3]string{"", "v1", "persistentvolumeclaims"}, &corev1.PersistentVolumeClaim{
			ObjectMeta: objMeta("data"),
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", StorageClassName: ptr.To("standard")},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce},
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		}},
		{"pv", [3]string{"", "v1", "persistentvolumes"}, &corev1.PersistentVolume{
			ObjectMeta: objMeta("pv-1"),
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "data"}, StorageClassName: "standard", VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem)},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
		}},
		{"resourcequota", [3]string{"", "v1", "resourcequotas"}, &corev1.ResourceQuota{
			ObjectMeta: objMeta("q"),
			Status: corev1.ResourceQuotaStatus{
				Hard: corev1.ResourceList{"pods": resource.MustParse("10"), "limits.cpu": resource.MustParse("4"), "requests.cpu": resource.MustParse("2")},
				Used: corev1.ResourceList{"pods": resource.MustParse("3"), "limits.cpu": resource.MustParse("1")},
			},
		}},
		{"podtemplate", [3]string{"", "v1", "podtemplates"}, &corev1.PodTemplate{
			ObjectMeta: objMeta("t"),
			Template:   corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, Spec: corev1.PodSpec{Containers: two}},
		}},
		{"replicationcontroller", [3]string{"", "v1", "replicationcontrollers"}, &corev1.ReplicationController{
			ObjectMeta: objMeta("rc"),
			Spec:       corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](2), Selector: map[string]string{"a": "b"}},
			Status:     corev1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 2},
		}},
		{"hpa", [3]string{"autoscaling", "v2", "horizontalpodautoscalers"}, &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: objMeta("web"),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
				MinReplicas:    ptr.To[int32](2), MaxReplicas: 10,
				Metrics: []autoscalingv2.MetricSpec{
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu",
						Target: autoscalingv2.MetricTarget{AverageUtilization: ptr.To[int32](80)}}},
					{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
						Target: autoscalingv2.MetricTarget{AverageValue: ptr.To(resource.MustParse("100"))}}},
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "memory",
						Target: autoscalingv2.MetricTarget{AverageValue: ptr.To(resource.MustParse("1Gi"))}}},
				},
			},
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 3, CurrentMetrics: []autoscalingv2.MetricStatus{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: "cpu",
					Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](55)}}},
			}},
		}},
		{"pdb", [3]string{"policy", "v1", "poddisruptionbudgets"}, &policyv1.PodDisruptionBudget{
			ObjectMeta: objMeta("pdb"),
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
		}},
		{"ingress", [3]string{"networking.k8s.io", "v1", "ingresses"}, &networkingv1.Ingress{
			ObjectMeta: objMeta("web"),
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), TLS: []networkingv1.IngressTLS{{}},
				Rules: []networkingv1.IngressRule{{Host: "a.example.com"}, {Host: "b.example.com"}, {}, {Host: "c.example.com"}, {Host: "d.example.com"}}},
			Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "1.2.3.4"}}}},
		}},
		{"ingressclass", [3]string{"networking.k8s.io", "v1", "ingressclasses"}, &networkingv1.IngressClass{
			ObjectMeta: objMeta("nginx"),
			Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx",
				Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr.To("k8s.example.com"), Kind: "IngressParameters", Name: "p"}},
		}},
		{"networkpolicy", [3]string{"networking.k8s.io", "v1", "networkpolicies"}, &networkingv1.NetworkPolicy{
			ObjectMeta: objMeta("deny"),
		}},
		{"rolebinding", [3]string{"rbac.authorization.k8s.io", "v1", "rolebindings"}, &rbacv1.RoleBinding{
			ObjectMeta: objMeta("rb"),
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "devs"},
				{Kind: "ServiceAccount", Namespace: "ns", Name: "bot"}, {Kind: "User", Name: "bob"}},
		}},
		{"clusterrolebinding", [3]string{"rbac.authorization.k8s.io", "v1", "clusterrolebindings"}, &rbacv1.ClusterRoleBinding{
			ObjectMeta: objMeta("crb"),
			RoleRef:    rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"},
		}},
		{"role (default table)", [3]string{"rbac.authorization.k8s.io", "v1", "roles"}, &rbacv1.Role{
			ObjectMeta: objMeta("r"),
		}},
		{"lease", [3]string{"coordination.k8s.io", "v1", "leases"}, &coordinationv1.Lease{
			ObjectMeta: objMeta("kube-scheduler"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1_abc")},
		}},
		{"storageclass", [3]string{"storage.k8s.io", "v1", "storageclasses"}, &storagev1.StorageClass{
			ObjectMeta: func() metav1.ObjectMeta {
				m := objMeta("standard")
				m.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
				return m
			}(),
			Provisioner: "rancher.io/local-path",
		}},
		{"priorityclass", [3]string{"scheduling.k8s.io", "v1", "priorityclasses"}, &schedulingv1.PriorityClass{
			ObjectMeta: objMeta("high"), Value: 1000000, PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
		}},
		{"mutatingwebhookconfiguration", [3]string{"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"}, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: objMeta("m"), Webhooks: make([]admissionregistrationv1.MutatingWebhook, 2),
		}},
	}
	gen := printers.NewTableGenerator().With(printersinternal.AddHandlers)
	kinds := map[string]bool{}
	for _, tc := range tests {
		res := lookup(t, tc.resource[0], tc.resource[1], tc.resource[2])
		kinds[res.Group+"/"+res.Kind] = true
		want := upstreamTable(t, gen, res, tc.obj)
		got, err := converter(t).ConvertObject(tc.obj, res, "None")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got.ColumnDefinitions, want.ColumnDefinitions) {
			t.Errorf("%s columns:\n got  %v\n want %v", tc.name, got.ColumnDefinitions, want.ColumnDefinitions)
		}
		if len(got.Rows) != 1 || len(want.Rows) != 1 {
			t.Fatalf("%s: %d rows, upstream %d, want 1", tc.name, len(got.Rows), len(want.Rows))
		}
		if !reflect.DeepEqual(got.Rows[0].Cells, want.Rows[0].Cells) || !reflect.DeepEqual(got.Rows[0].Conditions, want.Rows[0].Conditions) {
			t.Errorf("%s row:\n got  %#v %v\n want %#v %v", tc.name, got.Rows[0].Cells, got.Rows[0].Conditions, want.Rows[0].Cells, want.Rows[0].Conditions)
		}
		if len(got.Rows[0].Cells) != len(got.ColumnDefinitions) {
			t.Errorf("%s: %d cells for %d columns", tc.name, len(got.Rows[0].Cells), len(got.ColumnDefinitions))
		}
	}
	if len(kinds) < 15 {
		t.Errorf("compared %d kinds, want at least 15", len(kinds))
	}
}

// upstreamTable is the table kube-apiserver serves for obj: the imported
// printer called directly on the object converted with k8s.io/kubernetes's
// own scheme (legacyscheme), or the default table for a kind it has no
// printer for.
func upstreamTable(t *testing.T, gen *printers.HumanReadableGenerator, res *registry.Resource, obj runtime.Object) *metav1.Table {
	t.Helper()
	internal, err := legacyscheme.Scheme.ConvertToVersion(obj, schema.GroupVersion{Group: res.Group, Version: runtime.APIVersionInternal})
	if err != nil {
		t.Fatalf("cannot convert %T to the internal version: %v", obj, err)
	}
	tbl, err := gen.GenerateTable(internal, printers.GenerateOptions{Wide: true})
	if err != nil {
		// No printer for the kind: kube-apiserver's registry uses the
		// default table convertor.
		tbl, err = genericrest.NewDefaultTableConvertor(schema.GroupResource{Group: res.Group, Resource: res.Resource}).ConvertToTable(context.Background(), obj, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

// TestList prints lists as kube-apiserver does, with the list printers
// (StorageClasses mark the effective default only in a list).
func TestList(t *testing.T) {
	gen := printers.NewTableGenerator().With(printersinternal.AddHandlers)
	standard := func(name string, created time.Duration) runtime.Object {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created),
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "p"}
	}
	f := func(resource [3]string, objs []runtime.Object) {
		t.Helper()
		res := lookup(t, resource[0], resource[1], resource[2])
		got, err := converter(t).Convert(objs, res, "")
		if err != nil {
			t.Fatal(err)
		}
		want := upstreamList(t, gen, res, objs)
		if !reflect.DeepEqual(got.ColumnDefinitions, want.ColumnDefinitions) {
			t.Errorf("%s columns:\n got  %v\n want %v", res.Resource, got.ColumnDefinitions, want.ColumnDefinitions)
		}
		if len(got.Rows) != len(objs) || len(want.Rows) != len(objs) {
			t.Fatalf("%s: %d rows, upstream %d, for %d objects", res.Resource, len(got.Rows), len(want.Rows), len(objs))
		}
		for i, obj := range objs {
			if !reflect.DeepEqual(got.Rows[i].Cells, want.Rows[i].Cells) {
				t.Errorf("%s row %d: %#v, want %#v", res.Resource, i, got.Rows[i].Cells, want.Rows[i].Cells)
			}
			m, _ := meta.Accessor(obj)
			if p, ok := got.Rows[i].Object.Object.(*metav1.PartialObjectMetadata); !ok || p.Name != m.GetName() {
				t.Errorf("%s row %d object = %#v, want the object's metadata", res.Resource, i, got.Rows[i].Object.Object)
			}
		}
	}
	f([3]string{"", "v1", "pods"}, benchPods(20))
	f([3]string{"storage.k8s.io", "v1", "storageclasses"}, []runtime.Object{standard("old", 2*time.Hour), standard("new", time.Hour)})
	f([3]string{"rbac.authorization.k8s.io", "v1", "roles"}, []runtime.Object{&rbacv1.Role{ObjectMeta: objMeta("r1")}, &rbacv1.Role{ObjectMeta: objMeta("r2")}})
}

// upstreamList is the table kube-apiserver serves for a list of objs: the
// imported list printer called directly on the internal list.
func upstreamList(t *testing.T, gen *printers.HumanReadableGenerator, res *registry.Resource, objs []runtime.Object) *metav1.Table {
	t.Helper()
	internalGV := schema.GroupVersion{Group: res.Group, Version: runtime.APIVersionInternal}
	list, err := legacyscheme.Scheme.New(internalGV.WithKind(res.Kind + "List"))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]runtime.Object, len(objs))
	for i, o := range objs {
		if items[i], err = legacyscheme.Scheme.ConvertToVersion(o, internalGV); err != nil {
			t.Fatal(err)
		}
	}
	if err := meta.SetList(list, items); err != nil {
		t.Fatal(err)
	}
	tbl, err := gen.GenerateTable(list, printers.GenerateOptions{Wide: true})
	if err != nil {
		tbl, err = genericrest.NewDefaultTableConvertor(schema.GroupResource{Group: res.Group, Resource: res.Resource}).ConvertToTable(context.Background(), list, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

func TestPodConditions(t *testing.T) {
	res := lookup(t, "", "v1", "pods")
	tbl, err := converter(t).Convert([]runtime.Object{
		&corev1.Pod{ObjectMeta: objMeta("a"), Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		&corev1.Pod{ObjectMeta: objMeta("b"), Status: corev1.PodStatus{Phase: corev1.PodFailed}},
		&corev1.Pod{ObjectMeta: objMeta("c"), Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}, res, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Succeeded", "Failed", ""}
	for i, row := range tbl.Rows {
		reason := ""
		if len(row.Conditions) == 1 && row.Conditions[0].Type == metav1.RowCompleted && row.Conditions[0].Status == metav1.ConditionTrue {
			reason = row.Conditions[0].Reason
		}
		if reason != want[i] {
			t.Errorf("row %d conditions = %v, want completed %q", i, row.Conditions, want[i])
		}
	}
}

func TestIncludeObject(t *testing.T) {
	res := lookup(t, "apps", "v1", "deployments")
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "12", Labels: map[string]string{"a": "b"}}}

	for _, policy := range []string{"", "Metadata"} {
		tbl, err := converter(t).Convert([]runtime.Object{dep}, res, policy)
		if err != nil {
			t.Fatal(err)
		}
		partial, ok := tbl.Rows[0].Object.Object.(*metav1.PartialObjectMetadata)
		if !ok || partial.Name != "web" || partial.Labels["a"] != "b" || partial.ResourceVersion != "12" ||
			partial.APIVersion != "meta.k8s.io/v1" || partial.Kind != "PartialObjectMetadata" {
			t.Errorf("includeObject=%q row object = %#v", policy, tbl.Rows[0].Object.Object)
		}
	}

	tbl, err := converter(t).Convert([]runtime.Object{dep}, res, "Object")
	if err != nil {
		t.Fatal(err)
	}
	full, ok := tbl.Rows[0].Object.Object.(*appsv1.Deployment)
	if !ok || full.Name != "web" || full.APIVersion != "apps/v1" || full.Kind != "Deployment" {
		t.Errorf("includeObject=Object row object = %#v", tbl.Rows[0].Object.Object)
	}
	if dep.Kind != "" {
		t.Error("Convert modified the caller's object")
	}

	tbl, err = converter(t).Convert([]runtime.Object{dep}, res, "None")
	if err != nil || tbl.Rows[0].Object.Object != nil || tbl.Rows[0].Object.Raw != nil {
		t.Errorf("includeObject=None row object = %#v, %v", tbl.Rows[0].Object, err)
	}

	if _, err := converter(t).Convert(nil, res, "Everything"); !errors.Is(err, ErrIncludeObject) {
		t.Errorf("includeObject=Everything error = %v", err)
	}
	if _, err := converter(t).Convert([]runtime.Object{&corev1.Pod{}}, res, ""); !errors.Is(err, ErrObjectType) {
		t.Errorf("pod printed as deployment: error = %v", err)
	}
}

// TestKubectlPrints encodes a Table as the gateway sends it and prints it
// with kubectl's table printer (cli-runtime), as kubectl get does.
func TestKubectlPrints(t *testing.T) {
	res := lookup(t, "apps", "v1", "deployments")
	deps := []runtime.Object{
		&appsv1.Deployment{
			ObjectMeta: objMeta("web"),
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1"}}}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3},
		},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", CreationTimestamp: ago(36 * time.Hour)}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}},
	}
	tbl, err := converter(t).Convert(deps, res, "")
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var received metav1.Table
	if err := json.Unmarshal(body, &received); err != nil {
		t.Fatal(err)
	}
	print := func(wide bool) string {
		var out bytes.Buffer
		if err := cliprinters.NewTablePrinter(cliprinters.PrintOptions{Wide: wide}).PrintObj(&received, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	want := strings.Join([]string{
		"NAME   READY   UP-TO-DATE   AVAILABLE   AGE",
		"web    3/3     3            3           5h",
		"api    0/1     0            0           36h",
		"",
	}, "\n")
	if got := print(false); got != want {
		t.Errorf("kubectl get prints\n%s\nwant\n%s", got, want)
	}
	wantWide := strings.Join([]string{
		"NAME   READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES    SELECTOR",
		"web    3/3     3            3           5h    nginx        nginx:1   app=web",
		"api    0/1     0            0           36h                          ",
		"",
	}, "\n")
	if got := print(true); got != wantWide {
		t.Errorf("kubectl get -o wide prints\n%s\nwant\n%s", got, wantWide)
	}
}
