package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const (
	appsNS     = "cp-apps" // the Deployment of the deployment and rolling-update checks
	workloadTO = 3 * time.Minute
	pauseImage = "registry.k8s.io/pause:3.10"
)

func podTemplate(labels map[string]string, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: image}},
			// kwok's fake nodes carry no taints; the tolerations of
			// kwok's own examples are not needed.
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		},
	}
}

func deployment(name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels, image),
		},
	}
}

// waitDeployment waits until the Deployment's controller has observed its
// latest spec and all replicas are updated, ready and available.
func (cp *controlPlane) waitDeployment(t *testing.T, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	cp.waitFor(t, workloadTO, fmt.Sprintf("deployment %s/%s to have %d replicas available", ns, name, replicas), func(ctx context.Context) (bool, string, error) {
		var err error
		if d, err = cp.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, "", err
		}
		s := d.Status
		state := fmt.Sprintf("generation %d observed %d replicas %d updated %d ready %d available %d conditions %v",
			d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.Conditions)
		return s.ObservedGeneration >= d.Generation && s.Replicas == replicas && s.UpdatedReplicas == replicas &&
			s.ReadyReplicas == replicas && s.AvailableReplicas == replicas, state, nil
	})
	return d
}

// runningPods lists the pods of selector in ns and checks each is bound to
// a fake node, Running and Ready.
func (cp *controlPlane) runningPods(t *testing.T, ns, selector string, want int) []corev1.Pod {
	t.Helper()
	pods, err := cp.cs.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != want {
		t.Fatalf("%d pods of %s in %s, want %d", len(live), selector, ns, want)
	}
	for _, p := range live {
		if !slices.Contains(controlPlaneNodes, p.Spec.NodeName) {
			t.Errorf("pod %s is bound to %q, not a fake node", p.Name, p.Spec.NodeName)
		}
		if p.Status.Phase != corev1.PodRunning || !podReady(&p) || p.Status.PodIP == "" {
			t.Errorf("pod %s: phase %s ready %v podIP %q, want Running, ready, an IP", p.Name, p.Status.Phase, podReady(&p), p.Status.PodIP)
		}
	}
	return live
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (cp *controlPlane) testDeployment(t *testing.T) {
	cp.namespace(t, appsNS)
	if _, err := cp.cs.AppsV1().Deployments(appsNS).Create(ctx(t), deployment("web", 5, pauseImage), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitDeployment(t, appsNS, "web", 5)
	pods := cp.runningPods(t, appsNS, "app=web", 5)

	// The field selector kubelets (and kwok) watch their pods with.
	bound := 0
	for _, node := range controlPlaneNodes {
		on, err := cp.cs.CoreV1().Pods(appsNS).List(ctx(t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatalf("cannot list pods with spec.nodeName=%s: %v", node, err)
		}
		for _, p := range on.Items {
			if p.Spec.NodeName != node {
				t.Errorf("spec.nodeName=%s listed pod %s of node %q", node, p.Name, p.Spec.NodeName)
			}
		}
		bound += len(on.Items)
	}
	if bound != len(pods) {
		t.Errorf("the spec.nodeName field selectors listed %d pods in all, want %d", bound, len(pods))
	}
}

func (cp *controlPlane) testRollingUpdate(t *testing.T) {
	const image = "registry.k8s.io/pause:3.9"
	cp.k.ok(t, "set", "image", "-n", appsNS, "deployment/web", "main="+image)
	d := cp.waitDeployment(t, appsNS, "web", 5)
	if rev := d.Annotations["deployment.kubernetes.io/revision"]; rev != "2" {
		t.Errorf("deployment revision %q, want 2", rev)
	}
	if out := cp.k.ok(t, "rollout", "status", "-n", appsNS, "deployment/web", "--timeout=30s"); !strings.Contains(out, "successfully rolled out") {
		t.Errorf("kubectl rollout status: %q", out)
	}
	for _, p := range cp.runningPods(t, appsNS, "app=web", 5) {
		if got := p.Spec.Containers[0].Image; got != image {
			t.Errorf("pod %s runs %s after the update, want %s", p.Name, got, image)
		}
	}
	rss, err := cp.cs.AppsV1().ReplicaSets(appsNS).List(ctx(t), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, rs := range rss.Items {
		sizes = append(sizes, fmt.Sprintf("%s=%d", rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas))
	}
	slices.Sort(sizes)
	if want := []string{"registry.k8s.io/pause:3.10=0", image + "=5"}; !slices.Equal(sizes, want) {
		t.Errorf("replica sets %v, want %v", sizes, want)
	}
}

func (cp *controlPlane) testJob(t *testing.T) {
	const ns = "cp-job"
	cp.namespace(t, ns)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "work"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3),
			Template: podTemplate(nil, pauseImage),
		},
	}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := cp.cs.BatchV1().Jobs(ns).Create(ctx(t), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitFor(t, workloadTO, "job work to complete", func(ctx context.Context) (bool, string, error) {
		j, err := cp.cs.BatchV1().Jobs(ns).Get(ctx, "work", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return jobComplete(j) && j.Status.Succeeded == 3, fmt.Sprintf("active %d succeeded %d failed %d conditions %v", j.Status.Active, j.Status.Succeeded, j.Status.Failed, j.Status.Conditions), nil
	})
	pods, err := cp.cs.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=work"})
	if err != nil {
		t.Fatal(err)
	}
	succeeded := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded++
		}
	}
	if succeeded != 3 {
		t.Errorf("%d of the job's %d pods Succeeded, want 3", succeeded, len(pods.Items))
	}
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

const cronNS = "cp-cron"

// createCronJob creates, before the other checks, a CronJob firing every
// minute; testCronJob looks at it last, so its wait overlaps the others.
func (cp *controlPlane) createCronJob(t *testing.T) *batchv1.CronJob {
	t.Helper()
	cp.namespace(t, cronNS)
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{
			Schedule:          "* * * * *",
			ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: podTemplate(nil, pauseImage),
			}},
		},
	}
	cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	cj, err := cp.cs.BatchV1().CronJobs(cronNS).Create(ctx(t), cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot create the CronJob: %v", err)
	}
	return cj
}

func (cp *controlPlane) testCronJob(t *testing.T, cj *batchv1.CronJob) {
	// It fires at the next full minute; its Job then completes on kwok.
	cp.waitFor(t, workloadTO, "cronjob tick to fire and its job to succeed", func(ctx context.Context) (bool, string, error) {
		got, err := cp.cs.BatchV1().CronJobs(cronNS).Get(ctx, cj.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		s := got.Status
		return s.LastScheduleTime != nil && s.LastSuccessfulTime != nil,
			fmt.Sprintf("lastSchedule %v lastSuccessful %v active %d", s.LastScheduleTime, s.LastSuccessfulTime, len(s.Active)), nil
	})
	jobs, err := cp.cs.BatchV1().Jobs(cronNS).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := 0
	for _, j := range jobs.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == cj.UID {
			owned++
		}
	}
	if owned == 0 {
		t.Errorf("no Job is controlled by the CronJob (%d jobs in %s)", len(jobs.Items), cronNS)
	}
}

func (cp *controlPlane) testNamespaceDeletion(t *testing.T) {
	const ns = "cp-doomed"
	cp.namespace(t, ns)
	if _, err := cp.cs.AppsV1().Deployments(ns).Create(ctx(t), deployment("doomed", 2, pauseImage), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.cs.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.cs.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "doomed"}, Ports: []corev1.ServicePort{{Port: 80}},
	}}
	if _, err := cp.cs.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitDeployment(t, ns, "doomed", 2)
	cp.waitFor(t, time.Minute, "the endpointslice controller to list the service's pods", func(ctx context.Context) (bool, string, error) {
		slices, err := cp.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=doomed"})
		if err != nil {
			return false, "", err
		}
		n := 0
		for _, s := range slices.Items {
			n += len(s.Endpoints)
		}
		return n == 2, fmt.Sprintf("%d endpoints in %d slices", n, len(slices.Items)), nil
	})

	if err := cp.cs.CoreV1().Namespaces().Delete(ctx(t), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitFor(t, workloadTO, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, string, error) {
		n, err := cp.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("phase %s conditions %v finalizers %v", n.Status.Phase, n.Status.Conditions, n.Spec.Finalizers), nil
	})
	left := map[string]int{}
	count := func(kind string, n int, err error) {
		if err != nil {
			t.Errorf("cannot list %s of the deleted namespace: %v", kind, err)
		}
		if n > 0 {
			left[kind] = n
		}
	}
	c, o := cp.cs, metav1.ListOptions{}
	pods, err := c.CoreV1().Pods(ns).List(ctx(t), o)
	count("pods", len(pods.Items), err)
	deps, err := c.AppsV1().Deployments(ns).List(ctx(t), o)
	count("deployments", len(deps.Items), err)
	rss, err := c.AppsV1().ReplicaSets(ns).List(ctx(t), o)
	count("replicasets", len(rss.Items), err)
	cms, err := c.CoreV1().ConfigMaps(ns).List(ctx(t), o)
	count("configmaps", len(cms.Items), err)
	secrets, err := c.CoreV1().Secrets(ns).List(ctx(t), o)
	count("secrets", len(secrets.Items), err)
	svcs, err := c.CoreV1().Services(ns).List(ctx(t), o)
	count("services", len(svcs.Items), err)
	eps, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx(t), o)
	count("endpointslices", len(eps.Items), err)
	sas, err := c.CoreV1().ServiceAccounts(ns).List(ctx(t), o)
	count("serviceaccounts", len(sas.Items), err)
	if len(left) > 0 {
		t.Errorf("left in the deleted namespace: %v", left)
	}
}

func (cp *controlPlane) testForegroundDeletion(t *testing.T) {
	const ns = "cp-gc"
	cp.namespace(t, ns)
	labels := map[string]string{"app": "owned"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels, pauseImage),
		},
	}
	rs, err := cp.cs.AppsV1().ReplicaSets(ns).Create(ctx(t), rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp.waitFor(t, workloadTO, "replicaset owner to have 3 ready pods", func(ctx context.Context) (bool, string, error) {
		got, err := cp.cs.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return got.Status.ReadyReplicas == 3, fmt.Sprintf("replicas %d ready %d", got.Status.Replicas, got.Status.ReadyReplicas), nil
	})
	for _, p := range cp.runningPods(t, ns, "app=owned", 3) {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Fatalf("pod %s: controller reference %+v, want the replicaset with blockOwnerDeletion", p.Name, ref)
		}
	}

	cp.k.ok(t, "delete", "-n", ns, "replicaset/owner", "--cascade=foreground", "--wait=false")
	got, err := cp.cs.AppsV1().ReplicaSets(ns).Get(ctx(t), rs.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Errorf("the replicaset was gone right after a foreground delete with 3 pods")
	case err != nil:
		t.Fatal(err)
	case got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents):
		t.Errorf("replicaset after a foreground delete: deletionTimestamp %v finalizers %v, want set and %q", got.DeletionTimestamp, got.Finalizers, metav1.FinalizerDeleteDependents)
	}
	cp.waitFor(t, workloadTO, "the replicaset to be gone", func(ctx context.Context) (bool, string, error) {
		got, err := cp.cs.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("finalizers %v", got.Finalizers), nil
	})
	// Foreground: the owner goes only after its dependents.
	pods, err := cp.cs.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=owned"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left when the replicaset was gone; foreground deletion removes them first", len(pods.Items))
	}
}

func (cp *controlPlane) testDrain(t *testing.T) {
	const ns = "cp-drain"
	cp.namespace(t, ns)
	if _, err := cp.cs.AppsV1().Deployments(ns).Create(ctx(t), deployment("guarded", 3, pauseImage), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}
	if _, err := cp.cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx(t), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitDeployment(t, ns, "guarded", 3)
	cp.waitPDB(t, ns, "guarded", 0)
	node := cp.runningPods(t, ns, "app=guarded", 3)[0].Spec.NodeName
	t.Cleanup(func() { cp.k.run("uncordon", node) })

	drain := []string{"drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force"}
	r := cp.k.run(append(drain, "--timeout=12s")...)
	if r.err == nil {
		t.Fatalf("drain succeeded although the PDB allows no disruption:\n%s", r)
	}
	if !strings.Contains(r.stderr, "disruption budget") {
		t.Errorf("drain blocked by the PDB should say so:\n%s", r)
	}
	if pods := cp.runningPods(t, ns, "app=guarded", 3); len(pods) != 3 {
		t.Errorf("a pod was evicted despite the PDB")
	}

	cp.k.ok(t, "patch", "-n", ns, "pdb/guarded", "--type=merge", "-p", `{"spec":{"minAvailable":2}}`)
	cp.waitPDB(t, ns, "guarded", 1)
	r = cp.k.run(append(drain, "--timeout=40s")...)
	if r.err != nil {
		t.Fatalf("drain with one disruption allowed: %s", r)
	}
	n, err := cp.cs.CoreV1().Nodes().Get(ctx(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable {
		t.Errorf("node %s is schedulable after drain", node)
	}
	cp.waitDeployment(t, ns, "guarded", 3)
	for _, p := range cp.runningPods(t, ns, "app=guarded", 3) {
		if p.Spec.NodeName == node {
			t.Errorf("pod %s runs on the drained node %s", p.Name, node)
		}
	}
}

// waitPDB waits until the disruption controller has observed the PDB's
// spec and counted allowed disruptions.
func (cp *controlPlane) waitPDB(t *testing.T, ns, name string, allowed int32) {
	t.Helper()
	cp.waitFor(t, time.Minute, fmt.Sprintf("PDB %s to allow %d disruptions", name, allowed), func(ctx context.Context) (bool, string, error) {
		p, err := cp.cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		s := p.Status
		return s.ObservedGeneration == p.Generation && s.DisruptionsAllowed == allowed && s.ExpectedPods == 3,
			fmt.Sprintf("generation %d observed %d expected %d healthy %d allowed %d", p.Generation, s.ObservedGeneration, s.ExpectedPods, s.CurrentHealthy, s.DisruptionsAllowed), nil
	})
}

func (cp *controlPlane) testCSR(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "cp-alice", Organization: []string{"cp-team"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "cp-alice"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			ExpirationSeconds: ptr.To[int32](3600),
		},
	}
	if _, err := cp.cs.CertificatesV1().CertificateSigningRequests().Create(ctx(t), csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.k.ok(t, "certificate", "approve", "cp-alice")
	var certPEM []byte
	cp.waitFor(t, time.Minute, "the CSR to be signed", func(ctx context.Context) (bool, string, error) {
		got, err := cp.cs.CertificatesV1().CertificateSigningRequests().Get(ctx, "cp-alice", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		certPEM = got.Status.Certificate
		return len(certPEM) > 0, fmt.Sprintf("conditions %v", got.Status.Conditions), nil
	})
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("status.certificate is not PEM: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(cp.dir, "data", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the signed certificate does not verify against kgate dev's CA: %v", err)
	}
	// The certificate logs in as the requested user.
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(cp.cfg)
	cfg.CertData, cfg.KeyData = certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cp.checkUser(t, cfg, "cp-alice", "cp-team")
}

// checkUser asks kgate who cfg's credentials are (SelfSubjectReview).
func (cp *controlPlane) checkUser(t *testing.T, cfg *rest.Config, user, group string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx(t), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot authenticate as %s: %v", user, err)
	}
	if u := r.Status.UserInfo; u.Username != user || !slices.Contains(u.Groups, group) {
		t.Errorf("authenticated as %q %v, want %q in %q", u.Username, u.Groups, user, group)
	}
}

func (cp *controlPlane) testServiceAccountToken(t *testing.T) {
	const ns = "cp-sa"
	cp.namespace(t, ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Spec: podTemplate(nil, pauseImage).Spec}
	pod, err := cp.cs.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vol *corev1.Volume
	for i, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil {
		t.Fatalf("pod has no kube-api-access projected volume: %+v", pod.Spec.Volumes)
	}
	var hasToken, hasCA bool
	for _, src := range vol.Projected.Sources {
		if s := src.ServiceAccountToken; s != nil && s.Path == "token" {
			hasToken = true
		}
		if s := src.ConfigMap; s != nil && s.Name == "kube-root-ca.crt" {
			hasCA = true
		}
	}
	if !hasToken || !hasCA {
		t.Errorf("projected volume sources %+v: token %v, kube-root-ca.crt %v", vol.Projected.Sources, hasToken, hasCA)
	}
	mounted := slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == vol.Name && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && m.ReadOnly
	})
	if !mounted {
		t.Errorf("container mounts %+v, want %s read-only at the service-account path", pod.Spec.Containers[0].VolumeMounts, vol.Name)
	}
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName %q, want default", pod.Spec.ServiceAccountName)
	}

	// kube-controller-manager's root-ca-cert-publisher fills the ConfigMap
	// the volume reads, from --root-ca-file.
	caPEM, err := os.ReadFile(filepath.Join(cp.dir, "data", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cp.waitFor(t, time.Minute, "ConfigMap kube-root-ca.crt", func(ctx context.Context) (bool, string, error) {
		cm, err := cp.cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		if err != nil {
			return false, "", err
		}
		return cm.Data["ca.crt"] == string(caPEM), fmt.Sprintf("ca.crt %q", cm.Data["ca.crt"]), nil
	})

	// A token Secret, filled by kube-controller-manager's tokens controller
	// with --service-account-private-key-file: kgate accepts it.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "default-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	if _, err := cp.cs.CoreV1().Secrets(ns).Create(ctx(t), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var token []byte
	cp.waitFor(t, time.Minute, "the token Secret to be filled", func(ctx context.Context) (bool, string, error) {
		s, err := cp.cs.CoreV1().Secrets(ns).Get(ctx, "default-token", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		token = s.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0 && bytes.Equal(s.Data[corev1.ServiceAccountRootCAKey], caPEM), fmt.Sprintf("keys %v", mapKeys(s.Data)), nil
	})
	cfg := rest.AnonymousClientConfig(cp.cfg)
	cfg.BearerToken = string(token)
	cp.checkUser(t, cfg, "system:serviceaccount:"+ns+":default", "system:serviceaccounts:"+ns)

	cp.waitFor(t, time.Minute, "the pod to run", func(ctx context.Context) (bool, string, error) {
		p, err := cp.cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("node %q phase %s", p.Spec.NodeName, p.Status.Phase), nil
	})
}

func mapKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (cp *controlPlane) testNodePort(t *testing.T) {
	const ns = "cp-svc"
	cp.namespace(t, ns)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "exposed"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	svc, err := cp.cs.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot create a NodePort service: %v", err)
	}
	port := svc.Spec.Ports[0].NodePort
	if port == 0 {
		t.Skip("needs NodePort allocation, branch h-ictl: the service was created without a node port")
	}
	if port < 30000 || port > 32767 {
		t.Errorf("node port %d is outside the default range 30000-32767", port)
	}
}
