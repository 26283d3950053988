package devcluster_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv1ac "k8s.io/client-go/applyconfigurations/autoscaling/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func managerNames(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Manager+" "+string(e.Operation)+" "+e.Subresource)
	}
	slices.Sort(out)
	return out
}

// TestApply: client-go's typed Apply with apply configurations, in JSON
// and protobuf clients: apply creates, re-applies, a second manager
// conflicts (409 with one FieldManagerConflict cause per field, nothing
// written), force takes the field, ExtractDeployment gives back what a
// manager owns, status is applied through its subresource, and every
// other write records an Update entry.
func TestApply(t *testing.T) {
	c := cluster(t)
	for _, json := range []bool{true, false} {
		name := "protobuf"
		if json {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			testApply(t, clientset(t, c, json, nil))
		})
	}
}

func testApply(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	ns := uniqueNS("apply")
	ensureNamespace(t, cs, ns)
	deps := cs.AppsV1().Deployments(ns)
	dep := func(replicas int32, image string) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web", ns).
			WithLabels(map[string]string{"app": "web"}).
			WithSpec(appsv1ac.DeploymentSpec().
				WithReplicas(replicas).
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "web"})).
				WithTemplate(corev1ac.PodTemplateSpec().
					WithLabels(map[string]string{"app": "web"}).
					WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("web").WithImage(image)))))
	}
	opts := metav1.ApplyOptions{FieldManager: "deployer"}

	d, err := deps.Apply(ctx, dep(2, "nginx:1.25"), opts)
	if err != nil {
		t.Fatalf("apply (create): %v", err)
	}
	if d.Generation != 1 || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].TerminationMessagePath == "" {
		t.Errorf("created: generation %d, replicas %d, container %+v (defaults expected)", d.Generation, *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0])
	}
	if got := managerNames(d.ManagedFields); !slices.Equal(got, []string{"deployer Apply "}) {
		t.Errorf("managers after create: %v", got)
	}

	d, err = deps.Apply(ctx, dep(2, "nginx:1.26"), opts)
	if err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if d.Generation != 2 || d.Spec.Template.Spec.Containers[0].Image != "nginx:1.26" {
		t.Errorf("re-applied: generation %d, image %s", d.Generation, d.Spec.Template.Spec.Containers[0].Image)
	}

	// Another manager setting the replicas conflicts with deployer.
	other := appsv1ac.Deployment("web", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(5))
	_, err = deps.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "autoscaler"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: %v, want 409 Conflict", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict ||
		st.Details.Causes[0].Field != ".spec.replicas" || st.Details.Causes[0].Message != `conflict with "deployer"` {
		t.Errorf("conflict status: %+v", st)
	}
	if want := `Apply failed with 1 conflict: conflict with "deployer": .spec.replicas`; st.Message != want {
		t.Errorf("conflict message %q, want %q", st.Message, want)
	}
	if cur, err := deps.Get(ctx, "web", metav1.GetOptions{}); err != nil || cur.ResourceVersion != d.ResourceVersion {
		t.Errorf("a conflicting apply wrote: %v", err)
	}

	d, err = deps.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "autoscaler", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if *d.Spec.Replicas != 5 {
		t.Errorf("forced apply: replicas %d", *d.Spec.Replicas)
	}
	// What deployer owns no longer includes the replicas.
	owned, err := appsv1ac.ExtractDeployment(d, "deployer")
	if err != nil {
		t.Fatalf("extract: %v", err)
	}
	if owned.Spec == nil || owned.Spec.Replicas != nil || owned.Spec.Template == nil {
		t.Errorf("deployer owns %+v after the forced apply", owned.Spec)
	}

	// Status through its subresource, and an ordinary update.
	st2 := appsv1ac.Deployment("web", ns).WithStatus(appsv1ac.DeploymentStatus().WithObservedGeneration(d.Generation).WithReplicas(5))
	if d, err = deps.ApplyStatus(ctx, st2, metav1.ApplyOptions{FieldManager: "controller", Force: true}); err != nil {
		t.Fatalf("apply status: %v", err)
	}
	if d.Status.Replicas != 5 {
		t.Errorf("status after apply: %+v", d.Status)
	}
	d.Labels["tier"] = "front"
	if d, err = deps.Update(ctx, d, metav1.UpdateOptions{FieldManager: "editor"}); err != nil {
		t.Fatalf("update: %v", err)
	}
	want := []string{"autoscaler Apply ", "controller Apply status", "deployer Apply ", "editor Update "}
	if got := managerNames(d.ManagedFields); !slices.Equal(got, want) {
		t.Errorf("managers %v, want %v", got, want)
	}

	// Apply through the scale subresource: its entry lands on the
	// Deployment as upstream's scale REST puts it, taking the replicas
	// from autoscaler.
	scale := autoscalingv1ac.Scale().WithSpec(autoscalingv1ac.ScaleSpec().WithReplicas(7))
	if _, err := deps.ApplyScale(ctx, "web", scale, metav1.ApplyOptions{FieldManager: "hpa", Force: true}); err != nil {
		t.Fatalf("apply scale: %v", err)
	}
	if d, err = deps.Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	want = []string{"controller Apply status", "deployer Apply ", "editor Update ", "hpa Apply scale"}
	if got := managerNames(d.ManagedFields); *d.Spec.Replicas != 7 || !slices.Equal(got, want) {
		t.Errorf("after apply scale: replicas %d, managers %v, want %v", *d.Spec.Replicas, got, want)
	}

	// A ConfigMap created by Create and then applied: the create is an
	// Update by the client's user agent prefix.
	cms := cs.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := cms.Apply(ctx, corev1ac.ConfigMap("cfg", ns).WithData(map[string]string{"b": "2"}), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatalf("apply over a created object: %v", err)
	}
	if cm.Data["a"] != "1" || cm.Data["b"] != "2" {
		t.Errorf("data %v", cm.Data)
	}
	if got := managerNames(cm.ManagedFields); len(got) != 2 || got[0] != "applier Apply " || !strings.HasSuffix(got[1], " Update ") {
		t.Errorf("managers %v", got)
	}
	// fieldManager is required for apply: upstream's 422 on PatchOptions.
	_, err = cms.Apply(ctx, corev1ac.ConfigMap("cfg", ns), metav1.ApplyOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "PatchOptions.meta.k8s.io") || !strings.Contains(err.Error(), "fieldManager: Required value") {
		t.Errorf("apply without fieldManager: %v", err)
	}
	if code := statusCode(err); code != http.StatusUnprocessableEntity {
		t.Errorf("apply without fieldManager: code %d", code)
	}
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}
