package strategy_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/gateway/internal/strategy"
	"github.com/kgate/kgate/storage/registry"
)

func lookup(t *testing.T, gvr schema.GroupVersionResource) *registry.Resource {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Lookup(gvr)
	if !ok {
		t.Fatalf("%v not registered", gvr)
	}
	return res
}

func TestPrepareForCreate(t *testing.T) {
	deployments := lookup(t, appsv1.SchemeGroupVersion.WithResource("deployments"))
	configmaps := lookup(t, corev1.SchemeGroupVersion.WithResource("configmaps"))
	now := metav1.Now()
	grace := int64(3)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "x", ResourceVersion: "5", UID: types.UID("u"), Generation: 9,
			DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}, Labels: map[string]string{"keep": "me"},
		}
	}
	d := &appsv1.Deployment{ObjectMeta: meta(), Status: appsv1.DeploymentStatus{Replicas: 3}}
	strategy.PrepareForCreate(deployments, d)
	if d.ResourceVersion != "" || d.UID != "" || d.Generation != 0 || d.DeletionTimestamp != nil || d.DeletionGracePeriodSeconds != nil || d.ManagedFields != nil {
		t.Errorf("server-set metadata kept: %+v", d.ObjectMeta)
	}
	if d.Labels["keep"] != "me" {
		t.Error("labels dropped")
	}
	if d.Status.Replicas != 0 {
		t.Error("status of a resource with a status subresource kept on create")
	}

	cm := &corev1.ConfigMap{ObjectMeta: meta(), Data: map[string]string{"a": "b"}}
	strategy.PrepareForCreate(configmaps, cm)
	if cm.ResourceVersion != "" || cm.Data["a"] != "b" {
		t.Errorf("configmap %+v", cm)
	}
}

func TestPrepareForCreateNamespaceAndPod(t *testing.T) {
	namespaces := lookup(t, corev1.SchemeGroupVersion.WithResource("namespaces"))
	pods := lookup(t, corev1.SchemeGroupVersion.WithResource("pods"))

	ns := &corev1.Namespace{Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	strategy.PrepareForCreate(namespaces, ns)
	if ns.Status.Phase != corev1.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes {
		t.Errorf("namespace %+v", ns)
	}
	own := &corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"x/y"}}}
	strategy.PrepareForCreate(namespaces, own)
	if len(own.Spec.Finalizers) != 1 || own.Spec.Finalizers[0] != "x/y" {
		t.Errorf("namespace's own finalizers replaced: %v", own.Spec.Finalizers)
	}

	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		containers []corev1.ResourceRequirements
		want       corev1.PodQOSClass
	}{
		{"nothing set", []corev1.ResourceRequirements{{}}, corev1.PodQOSBestEffort},
		{"only other resources", []corev1.ResourceRequirements{{Limits: rl("nvidia.com/gpu", "1")}}, corev1.PodQOSBestEffort},
		{"limits equal requests", []corev1.ResourceRequirements{{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}}, corev1.PodQOSGuaranteed},
		{"limits only (requests default to them)", []corev1.ResourceRequirements{{Limits: rl("cpu", "1", "memory", "1Gi")}}, corev1.PodQOSGuaranteed},
		{"request below limit", []corev1.ResourceRequirements{{Requests: rl("cpu", "500m", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")}}, corev1.PodQOSBurstable},
		{"cpu limit only", []corev1.ResourceRequirements{{Limits: rl("cpu", "1")}}, corev1.PodQOSBurstable},
		{"one container without limits", []corev1.ResourceRequirements{{Limits: rl("cpu", "1", "memory", "1Gi")}, {}}, corev1.PodQOSBurstable},
		{"requests only", []corev1.ResourceRequirements{{Requests: rl("memory", "1Gi")}}, corev1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
			for _, r := range tc.containers {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c", Resources: r})
			}
			strategy.PrepareForCreate(pods, p)
			if p.Status.Phase != corev1.PodPending || p.Status.PodIP != "" {
				t.Errorf("status %+v, want only Pending and the QoS class", p.Status)
			}
			if p.Status.QOSClass != tc.want {
				t.Errorf("QoS %s, want %s", p.Status.QOSClass, tc.want)
			}
		})
	}
}

func TestPrepareForUpdate(t *testing.T) {
	deployments := lookup(t, appsv1.SchemeGroupVersion.WithResource("deployments"))
	configmaps := lookup(t, corev1.SchemeGroupVersion.WithResource("configmaps"))
	namespaces := lookup(t, corev1.SchemeGroupVersion.WithResource("namespaces"))

	old := &appsv1.Deployment{Status: appsv1.DeploymentStatus{Replicas: 3}}
	next := &appsv1.Deployment{Status: appsv1.DeploymentStatus{Replicas: 99}}
	strategy.PrepareForUpdate(deployments, next, old)
	if next.Status.Replicas != 3 {
		t.Errorf("a main-resource update changed the status: %d", next.Status.Replicas)
	}

	// ConfigMaps have no status subresource: nothing is copied, and a
	// mismatch of types is harmless.
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "new"}}
	strategy.PrepareForUpdate(configmaps, cm, &corev1.ConfigMap{Data: map[string]string{"a": "old"}})
	if cm.Data["a"] != "new" {
		t.Error("configmap data replaced")
	}

	ns := &corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: nil}}
	strategy.PrepareForUpdate(namespaces, ns, &corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}})
	if len(ns.Spec.Finalizers) != 1 {
		t.Error("a namespace's finalizers changed outside /finalize")
	}
}

func TestPrepareForStatusUpdate(t *testing.T) {
	old := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", ResourceVersion: "5", Labels: map[string]string{"v": "old"}},
		Spec:       appsv1.DeploymentSpec{Paused: false},
		Status:     appsv1.DeploymentStatus{Replicas: 1},
	}
	sent := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", ResourceVersion: "4", Labels: map[string]string{"v": "new"}},
		Spec:       appsv1.DeploymentSpec{Paused: true},
		Status:     appsv1.DeploymentStatus{Replicas: 7},
	}
	out := strategy.PrepareForStatusUpdate(sent, old).(*appsv1.Deployment)
	if out.Status.Replicas != 7 {
		t.Errorf("status not taken: %d", out.Status.Replicas)
	}
	if out.Spec.Paused || out.Labels["v"] != "old" {
		t.Errorf("status update changed spec or labels: %+v %v", out.Spec, out.Labels)
	}
	if out.ResourceVersion != "4" {
		t.Errorf("resourceVersion %q, want the request's (the precondition)", out.ResourceVersion)
	}
	if old.Status.Replicas != 1 {
		t.Error("the stored object was changed in place")
	}
}

func TestValidateNames(t *testing.T) {
	f := func(gvr schema.GroupVersionResource, ns, name string, wantOK bool) {
		t.Helper()
		res := lookup(t, gvr)
		// ValidateCreate reads only metadata: any typed object carries it.
		errs := strategy.ValidateCreate(res, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		if (len(errs) == 0) != wantOK {
			t.Errorf("%s %q in %q: errors %v, want ok %v", gvr.Resource, name, ns, errs, wantOK)
		}
	}
	core := corev1.SchemeGroupVersion
	rbac := schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	f(core.WithResource("configmaps"), "ns", "a.b-c", true)
	f(core.WithResource("configmaps"), "ns", "A", false)
	f(core.WithResource("configmaps"), "", "a", false) // namespaced needs a namespace
	f(core.WithResource("namespaces"), "", "a.b", false)
	f(core.WithResource("namespaces"), "", "a-b", true)
	f(core.WithResource("services"), "ns", "1abc", false) // DNS-1035: starts with a letter
	f(core.WithResource("services"), "ns", "abc", true)
	f(rbac.WithResource("clusterroles"), "", "system:controller:x", true)
	f(rbac.WithResource("clusterroles"), "", "a/b", false)
	f(core.WithResource("events"), "ns", "Pod.ABC.123", true)
	f(core.WithResource("nodes"), "ns", "n", false) // cluster-scoped takes no namespace
	f(core.WithResource("nodes"), "", "n", true)
}

func TestValidateUpdate(t *testing.T) {
	res := lookup(t, corev1.SchemeGroupVersion.WithResource("configmaps"))
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", ResourceVersion: "3"}}
	next := old.DeepCopy()
	next.Labels = map[string]string{"a": "b"}
	if errs := strategy.ValidateUpdate(res, next, old); len(errs) != 0 {
		t.Errorf("label change refused: %v", errs)
	}
	next.UID = "u2"
	errs := strategy.ValidateUpdate(res, next, old)
	if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "metadata.uid") {
		t.Errorf("uid change: %v", errs)
	}
	if errs := strategy.ValidateUpdate(res, &corev1.ConfigMapList{}, old); len(errs) == 0 {
		t.Error("an object without metadata validated")
	}
}

func TestObjectMetaAndNormalize(t *testing.T) {
	if _, err := strategy.ObjectMeta(&corev1.ConfigMapList{}); err == nil {
		t.Error("a list has object metadata")
	}
	m, err := strategy.ObjectMeta(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}})
	if err != nil || m.Name != "p" {
		t.Errorf("meta %v, %v", m, err)
	}
	s := &corev1.Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "two", "c": "three"}}
	strategy.Normalize(s)
	if s.StringData != nil || string(s.Data["a"]) != "1" || string(s.Data["b"]) != "two" || string(s.Data["c"]) != "three" {
		t.Errorf("secret %+v", s)
	}
	only := &corev1.Secret{StringData: map[string]string{"k": "v"}}
	strategy.Normalize(only)
	if string(only.Data["k"]) != "v" {
		t.Errorf("stringData into a secret without data: %+v", only)
	}
}
