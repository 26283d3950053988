package builtin

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	api "k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/kgate/kgate/storage/registry"
)

func newSemantics(t *testing.T) *Semantics {
	t.Helper()
	s, err := New(registry.Builtin())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func resource(t *testing.T, group, name string) *registry.Resource {
	t.Helper()
	return mustResource(t, group, name)
}

func mustResource(t testing.TB, group, name string) *registry.Resource {
	t.Helper()
	for _, r := range registry.Builtin() {
		if r.Group == group && r.Resource == name {
			return &r
		}
	}
	t.Fatalf("registry.Builtin() serves no %s in group %q", name, group)
	return nil
}

// paths returns "Type field" for each error, sorted: what a client sees
// in the causes of a 422.
func paths(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	sort.Strings(out)
	return out
}

func objMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

func container() corev1.Container {
	return corev1.Container{Name: "app", Image: "nginx:1.29"}
}

func labels() map[string]string { return map[string]string{"app": "web"} }

func deploymentOf(selector, template map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: objMeta("default", "web"),
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: template},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{container()}},
			},
		},
	}
}

// TestEmptyPodMatchesUpstreamValidation checks that an empty Pod gets the
// field errors of upstream's ValidatePodCreate called directly on the
// same (defaulted, internal) object.
func TestEmptyPodMatchesUpstreamValidation(t *testing.T) {
	s := newSemantics(t)
	pods := resource(t, "", "pods")

	got, err := s.Create(context.Background(), pods, "", &corev1.Pod{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got.Object != nil || len(got.Errors) == 0 {
		t.Fatalf("Create of an empty Pod = %+v, want field errors and no object", got)
	}

	v1pod := &corev1.Pod{}
	s.Default(v1pod)
	internal, err := s.toInternal(pods, v1pod)
	if err != nil {
		t.Fatal(err)
	}
	pod := internal.(*api.Pod)
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&pod.Spec, nil, &pod.ObjectMeta, nil)
	opts.ResourceIsPod = true
	want := corevalidation.ValidatePodCreate(pod, opts)
	if len(want) == 0 {
		t.Fatal("upstream's ValidatePodCreate accepts an empty Pod: the comparison would prove nothing")
	}
	if diff := cmp.Diff(paths(want), paths(got.Errors)); diff != "" {
		t.Errorf("field errors differ from upstream's ValidatePodCreate (-upstream +builtin):\n%s", diff)
	}
	t.Logf("empty Pod: %d field errors: %s", len(got.Errors), strings.Join(paths(got.Errors), "; "))
}

func TestCreateValidation(t *testing.T) {
	s := newSemantics(t)
	tests := []struct {
		name     string
		group    string
		resource string
		obj      runtime.Object
		want     []string // "Type field" that must be among the errors; none: valid
		upstream func(obj runtime.Object) field.ErrorList
	}{
		{
			name: "deployment whose selector does not match its template", group: "apps", resource: "deployments",
			obj:  deploymentOf(map[string]string{"app": "db"}, labels()),
			want: []string{"FieldValueInvalid spec.template.metadata.labels"},
			upstream: func(obj runtime.Object) field.ErrorList {
				d := obj.(*apps.Deployment)
				return appsvalidation.ValidateDeployment(d, podutil.GetValidationOptionsFromPodTemplate(&d.Spec.Template, nil))
			},
		},
		{
			name: "deployment whose selector matches", group: "apps", resource: "deployments",
			obj: deploymentOf(labels(), labels()),
		},
		{
			name: "configmap with a bad key", group: "", resource: "configmaps",
			obj:  &corev1.ConfigMap{ObjectMeta: objMeta("default", "c"), Data: map[string]string{"a b": "x"}},
			want: []string{"FieldValueInvalid data[a b]"},
		},
		{
			name: "namespace with an invalid name", group: "", resource: "namespaces",
			obj:  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Label"}},
			want: []string{"FieldValueInvalid metadata.name"},
		},
		{
			name: "pod without a namespace", group: "", resource: "pods",
			obj:  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{container()}}},
			want: []string{"FieldValueRequired metadata.namespace"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := resource(t, tt.group, tt.resource)
			var upstreamErrs field.ErrorList
			if tt.upstream != nil {
				in := tt.obj.DeepCopyObject()
				s.Default(in)
				internal, err := s.toInternal(res, in)
				if err != nil {
					t.Fatal(err)
				}
				upstreamErrs = tt.upstream(internal)
			}
			got, err := s.Create(context.Background(), res, "", tt.obj)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if len(tt.want) == 0 {
				if len(got.Errors) > 0 || got.Object == nil {
					t.Fatalf("Create = %v, want a valid object", got.Errors)
				}
				return
			}
			have := paths(got.Errors)
			for _, w := range tt.want {
				if !contains(have, w) {
					t.Errorf("errors %q lack %q", have, w)
				}
				if tt.upstream != nil && !contains(paths(upstreamErrs), w) {
					t.Errorf("upstream's validation called directly gives %q, not %q", paths(upstreamErrs), w)
				}
			}
			if got.Object != nil {
				t.Errorf("an invalid create returned an object")
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDefaulting(t *testing.T) {
	s := newSemantics(t)
	pod := &corev1.Pod{ObjectMeta: objMeta("default", "p"), Spec: corev1.PodSpec{Containers: []corev1.Container{container()}}}
	got, err := s.Create(context.Background(), resource(t, "", "pods"), "", pod)
	if err != nil || len(got.Errors) > 0 {
		t.Fatalf("Create pod: %v %v", err, got.Errors)
	}
	p := got.Object.(*corev1.Pod)
	if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 30", g)
	}
	if p.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("dnsPolicy = %q, want ClusterFirst", p.Spec.DNSPolicy)
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("restartPolicy = %q, want Always", p.Spec.RestartPolicy)
	}
	c := p.Spec.Containers[0]
	if c.TerminationMessagePath != corev1.TerminationMessagePathDefault {
		t.Errorf("terminationMessagePath = %q, want %q", c.TerminationMessagePath, corev1.TerminationMessagePathDefault)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy = %q, want IfNotPresent for a tagged image", c.ImagePullPolicy)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("status.phase = %q, want Pending (the strategy's PrepareForCreate)", p.Status.Phase)
	}

	got, err = s.Create(context.Background(), resource(t, "apps", "deployments"), "", deploymentOf(labels(), labels()))
	if err != nil || len(got.Errors) > 0 {
		t.Fatalf("Create deployment: %v %v", err, got.Errors)
	}
	d := got.Object.(*appsv1.Deployment)
	quarter := intstr.FromString("25%")
	want := appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: &quarter}}
	if diff := cmp.Diff(want, d.Spec.Strategy); diff != "" {
		t.Errorf("deployment strategy (-want +got):\n%s", diff)
	}
	if r := d.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("replicas = %v, want 1", r)
	}
	if d.Generation != 1 {
		t.Errorf("generation = %d, want 1", d.Generation)
	}
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
		t.Errorf("type meta = %q %q, want apps/v1 Deployment", d.APIVersion, d.Kind)
	}
}

func TestGenerateNameThenValidate(t *testing.T) {
	s := newSemantics(t)
	pods := resource(t, "", "pods")
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "web-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{container()}}}
	}
	got, err := s.Create(context.Background(), pods, "", pod())
	if err != nil || len(got.Errors) > 0 {
		t.Fatalf("Create with generateName: %v %v", err, got.Errors)
	}
	name := got.Object.(*corev1.Pod).Name
	if !strings.HasPrefix(name, "web-") || len(name) != len("web-")+5 {
		t.Errorf("generated name = %q, want web- and 5 random characters", name)
	}

	// The same object validated without generating first is what issue 11
	// saw: metadata.name required.
	p := pod()
	s.Default(p)
	internal, err := s.toInternal(pods, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := requestContext(context.Background(), pods, "", "create", internal)
	if err != nil {
		t.Fatal(err)
	}
	st := s.strategies[pods.GVR().GroupResource()].main
	if errs := st.Validate(ctx, internal); !contains(paths(errs), "FieldValueRequired metadata.name") {
		t.Errorf("validating before generating gives %q, want metadata.name required", paths(errs))
	}

	// GenerateName alone, as the write path calls it; a set name stays.
	p = pod()
	if err := s.GenerateName(pods, p); err != nil || !strings.HasPrefix(p.Name, "web-") {
		t.Errorf("GenerateName: name %q, err %v", p.Name, err)
	}
	p.Name = "fixed"
	if err := s.GenerateName(pods, p); err != nil || p.Name != "fixed" {
		t.Errorf("GenerateName replaced a set name: %q, err %v", p.Name, err)
	}
}

func svcAt(ip string) *corev1.Service {
	single := corev1.IPFamilyPolicySingleStack
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1", ResourceVersion: "5"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
			Selector: labels(),
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func TestUpdate(t *testing.T) {
	s := newSemantics(t)
	tests := []struct {
		name        string
		group       string
		resource    string
		subresource string
		old, obj    runtime.Object
		want        []string // "Type field" among the errors; none: valid
		check       func(t *testing.T, out runtime.Object)
	}{
		{
			name: "service clusterIP changes", group: "", resource: "services",
			old: svcAt("10.96.0.10"), obj: svcAt("10.96.0.11"),
			want: []string{"FieldValueInvalid spec.clusterIPs[0]"},
		},
		{
			name: "service unchanged clusterIP", group: "", resource: "services",
			old: svcAt("10.96.0.10"), obj: svcAt("10.96.0.10"),
		},
		{
			name: "pod status update keeps spec", group: "", resource: "pods", subresource: "status",
			old: podWith("nginx:1.29", corev1.PodPending), obj: podWith("nginx:evil", corev1.PodRunning),
			check: func(t *testing.T, out runtime.Object) {
				p := out.(*corev1.Pod)
				if img := p.Spec.Containers[0].Image; img != "nginx:1.29" {
					t.Errorf("status update changed spec: image %q", img)
				}
				if p.Status.Phase != corev1.PodRunning {
					t.Errorf("status.phase = %q, want Running", p.Status.Phase)
				}
			},
		},
		{
			name: "pod update keeps status", group: "", resource: "pods",
			old: podWith("nginx:1.29", corev1.PodPending), obj: podWith("nginx:1.30", corev1.PodRunning),
			check: func(t *testing.T, out runtime.Object) {
				p := out.(*corev1.Pod)
				if p.Status.Phase != corev1.PodPending {
					t.Errorf("main update changed status.phase to %q", p.Status.Phase)
				}
				if img := p.Spec.Containers[0].Image; img != "nginx:1.30" {
					t.Errorf("image = %q, want nginx:1.30", img)
				}
			},
		},
		{
			name: "deployment status update keeps spec and generation", group: "apps", resource: "deployments", subresource: "status",
			old: deploymentAt(3, 2, 0), obj: deploymentAt(3, 5, 3),
			check: func(t *testing.T, out runtime.Object) {
				d := out.(*appsv1.Deployment)
				if *d.Spec.Replicas != 2 || d.Generation != 3 || d.Status.Replicas != 3 {
					t.Errorf("replicas %d, generation %d, status.replicas %d; want 2, 3, 3", *d.Spec.Replicas, d.Generation, d.Status.Replicas)
				}
			},
		},
		{
			name: "deployment spec update bumps generation and keeps status", group: "apps", resource: "deployments",
			old: deploymentAt(3, 2, 2), obj: deploymentAt(9, 4, 0),
			check: func(t *testing.T, out runtime.Object) {
				d := out.(*appsv1.Deployment)
				if *d.Spec.Replicas != 4 || d.Generation != 4 || d.Status.Replicas != 2 {
					t.Errorf("replicas %d, generation %d, status.replicas %d; want 4, 4, 2", *d.Spec.Replicas, d.Generation, d.Status.Replicas)
				}
			},
		},
		{
			name: "deployment scale goes through the main strategy", group: "apps", resource: "deployments", subresource: "scale",
			old: deploymentAt(3, 2, 2), obj: deploymentAt(3, 7, 2),
			check: func(t *testing.T, out runtime.Object) {
				d := out.(*appsv1.Deployment)
				if *d.Spec.Replicas != 7 || d.Generation != 4 {
					t.Errorf("replicas %d, generation %d; want 7, 4", *d.Spec.Replicas, d.Generation)
				}
			},
		},
		{
			name: "deployment selector is immutable", group: "apps", resource: "deployments",
			old: deploymentAt(3, 2, 2),
			obj: func() runtime.Object {
				d := deploymentAt(3, 2, 2)
				d.Spec.Selector.MatchLabels = map[string]string{"app": "web", "tier": "front"}
				d.Spec.Template.Labels = map[string]string{"app": "web", "tier": "front"}
				return d
			}(),
			want: []string{"FieldValueInvalid spec.selector"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := resource(t, tt.group, tt.resource)
			oldCopy := tt.old.DeepCopyObject()
			got, err := s.Update(context.Background(), res, tt.subresource, tt.obj, tt.old)
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if diff := cmp.Diff(oldCopy, tt.old); diff != "" {
				t.Errorf("Update modified the old object:\n%s", diff)
			}
			if len(tt.want) > 0 {
				have := paths(got.Errors)
				for _, w := range tt.want {
					if !contains(have, w) {
						t.Errorf("errors %q lack %q", have, w)
					}
				}
				return
			}
			if len(got.Errors) > 0 {
				t.Fatalf("Update: %v", got.Errors)
			}
			if tt.check != nil {
				tt.check(t, got.Object)
			}
		})
	}
}

func podWith(image string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u1", ResourceVersion: "5", Generation: 1},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func deploymentAt(generation int64, replicas, statusReplicas int32) *appsv1.Deployment {
	d := deploymentOf(labels(), labels())
	d.UID, d.ResourceVersion, d.Generation = "u1", "5", generation
	d.Spec.Replicas = &replicas
	d.Status.Replicas = statusReplicas
	return d
}

func TestWarnings(t *testing.T) {
	s := newSemantics(t)
	pod := &corev1.Pod{ObjectMeta: objMeta("default", "p"), Spec: corev1.PodSpec{
		Containers:   []corev1.Container{container()},
		NodeSelector: map[string]string{"beta.kubernetes.io/os": "linux"},
	}}
	got, err := s.Create(context.Background(), resource(t, "", "pods"), "", pod)
	if err != nil || len(got.Errors) > 0 {
		t.Fatalf("Create: %v %v", err, got.Errors)
	}
	if len(got.Warnings) == 0 || !strings.Contains(strings.Join(got.Warnings, "\n"), "beta.kubernetes.io/os") {
		t.Errorf("warnings = %q, want upstream's deprecation of beta.kubernetes.io/os", got.Warnings)
	}
}

func TestUnsupported(t *testing.T) {
	s := newSemantics(t)
	pod := &corev1.Pod{ObjectMeta: objMeta("default", "p")}
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"create on a subresource", func() error {
			_, err := s.Create(context.Background(), resource(t, "", "pods"), "binding", pod)
			return err
		}, ErrSubresource},
		{"update of a subresource with no strategy", func() error {
			_, err := s.Update(context.Background(), resource(t, "", "pods"), "log", pod, pod)
			return err
		}, ErrSubresource},
		{"a review API", func() error {
			_, err := s.Create(context.Background(), resource(t, "authorization.k8s.io", "subjectaccessreviews"), "", pod)
			return err
		}, ErrUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}
