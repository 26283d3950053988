package devcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage/storagetest"
)

// TestUpstreamAdmissionPlugins: kube-apiserver's own plugins run in kgate
// dev's chain by default, on listers the gateway's feed fills: a new
// PriorityClass is resolved into a pod's priority, the pod gets its
// ServiceAccount token volume and the default tolerations, and a
// namespace's PodSecurity label rejects a host-network pod with
// upstream's message.
func TestUpstreamAdmissionPlugins(t *testing.T) {
	c := cluster(t)
	cs := clientset(t, c, false, nil)
	ctx := context.Background()
	ns := uniqueNS("upstream-admission")
	ensureNamespace(t, cs, ns)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000}
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.SchedulingV1().PriorityClasses().Delete(ctx, pc.Name, metav1.DeleteOptions{}) }()
	pod := func(name string, privileged bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{PriorityClassName: pc.Name, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if privileged {
			// Not securityContext.privileged: kgate, like kube-apiserver
			// without --allow-privileged, refuses it in validation first.
			p.Spec.HostNetwork = true
		}
		return p
	}
	var got *corev1.Pod
	i := 0
	// The feed follows the PriorityClass into the gateway's lister.
	storagetest.Eventually(t, 15*time.Second, "the PriorityClass is known to admission", func() error {
		i++
		p, err := cs.CoreV1().Pods(ns).Create(ctx, pod("p"+string(rune('a'+i)), false), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "no PriorityClass with name") {
			return errNotYet
		}
		got = p
		return err
	})
	if got.Spec.Priority == nil || *got.Spec.Priority != 1000 {
		t.Errorf("priority %v, want 1000", got.Spec.Priority)
	}
	if got.Spec.ServiceAccountName != "default" || len(got.Spec.Volumes) != 1 || !strings.HasPrefix(got.Spec.Volumes[0].Name, "kube-api-access-") {
		t.Errorf("service account %q volumes %+v, want default and its token volume", got.Spec.ServiceAccountName, got.Spec.Volumes)
	}
	if n := len(got.Spec.Tolerations); n != 2 {
		t.Errorf("tolerations %+v, want not-ready and unreachable", got.Spec.Tolerations)
	}

	cur, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := cs.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const want = `pods "bad" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`
	storagetest.Eventually(t, 15*time.Second, "the namespace label is known to admission", func() error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("bad", true), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return errNotYet
		}
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Fatalf("privileged pod: %v, want %s", err, want)
		}
		return nil
	})
}
