package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// controlPlaneNodes are the fake nodes kwok runs for TestControlPlane.
var controlPlaneNodes = []string{"kwok-node-0", "kwok-node-1", "kwok-node-2"}

// heartbeatWindow is how long the nodes must stay Ready on their Lease
// heartbeats alone (kwok renews the Leases; it updates node status only
// every ten minutes).
const heartbeatWindow = 2 * time.Minute

// controlPlaneBinaries are the upstream components TestControlPlane runs
// against kgate dev, built by `make test-controlplane` from the nested
// modules cmd/kube-controller-manager, cmd/kube-scheduler and cmd/kwok.
type controlPlaneBinaries struct {
	kcm, scheduler, kwok string
}

// controlPlaneBins reads KCM_BIN, KUBE_SCHEDULER_BIN and KWOK_BIN and
// skips the test, saying why, when one is unset or missing: building the
// three takes many minutes, so only `make test-controlplane` pays for it.
func controlPlaneBins(t *testing.T) controlPlaneBinaries {
	t.Helper()
	b := controlPlaneBinaries{kcm: os.Getenv("KCM_BIN"), scheduler: os.Getenv("KUBE_SCHEDULER_BIN"), kwok: os.Getenv("KWOK_BIN")}
	for env, path := range map[string]string{"KCM_BIN": b.kcm, "KUBE_SCHEDULER_BIN": b.scheduler, "KWOK_BIN": b.kwok} {
		if path == "" {
			t.Skipf("e2e: %s is not set; `make test-controlplane` builds kube-controller-manager, kube-scheduler and kwok and runs this test", env)
		}
		if _, err := os.Stat(path); err != nil {
			t.Skipf("e2e: %s=%s: %v; `make test-controlplane` builds it", env, path, err)
		}
	}
	return b
}

// startComponent starts an upstream component of the control plane;
// only its flags say where the cluster is (KUBECONFIG is dropped).
func startComponent(t *testing.T, name, bin string, args ...string) *role {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return startProcess(t, name, cmd)
}

// alive fails the test when the process exited.
func (c *role) alive(t *testing.T) {
	t.Helper()
	select {
	case <-c.exited:
		t.Fatalf("%s exited (%v):\n%s", c.name, c.err, c.log.tail(60))
	default:
	}
}

// kwokStages writes kwok's own stage definitions — fast node
// initialisation, Lease heartbeats, pods Running, Job pods Succeeded,
// deleted pods removed — from the kwok module's kustomize/stage folders
// into one config file. The folders' kustomization.yaml lists the files,
// so nothing of kwok's configuration is copied by hand.
func kwokStages(t *testing.T, dir string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	cmd.Dir = filepath.Join(root, "cmd", "kwok")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cannot find the kwok module (go list -m in cmd/kwok): %v", err)
	}
	stageDir := filepath.Join(strings.TrimSpace(string(out)), "kustomize", "stage")
	var docs []string
	for _, folder := range []string{"node/fast", "node/heartbeat-with-lease", "pod/fast"} {
		raw, err := os.ReadFile(filepath.Join(stageDir, folder, "kustomization.yaml"))
		if err != nil {
			t.Fatalf("cannot read kwok's stages: %v", err)
		}
		var k struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(raw, &k); err != nil || len(k.Resources) == 0 {
			t.Fatalf("kwok's %s/kustomization.yaml lists no resources (%v)", folder, err)
		}
		for _, r := range k.Resources {
			doc, err := os.ReadFile(filepath.Join(stageDir, folder, r))
			if err != nil {
				t.Fatalf("cannot read kwok's stage: %v", err)
			}
			docs = append(docs, string(doc))
		}
	}
	path := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// controlPlane is kgate dev with kube-controller-manager, kube-scheduler
// and kwok running against it, and three fake nodes.
type controlPlane struct {
	s          *server
	dir        string
	cfg        *rest.Config
	cs         *kubernetes.Clientset
	k          *kubectl
	components []*role
}

// alive fails the test when kgate dev or a component exited.
func (cp *controlPlane) alive(t *testing.T) {
	t.Helper()
	if !cp.s.running() {
		t.Fatalf("kgate dev exited (%v):\n%s", cp.s.waitErr, cp.s.log.crash())
	}
	for _, c := range cp.components {
		c.alive(t)
	}
}

// waitFor polls cond every 250ms until it reports done, fails or timeout
// passes; state says what was seen last, for the failure message. It also
// fails early when a process of the control plane died.
func (cp *controlPlane) waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	var dead error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !cp.s.running() {
			dead = fmt.Errorf("kgate dev exited (%v)", cp.s.waitErr)
			return false, dead
		}
		for _, c := range cp.components {
			select {
			case <-c.exited:
				dead = fmt.Errorf("%s exited (%v)", c.name, c.err)
				return false, dead
			default:
			}
		}
		done, state, err := cond(ctx)
		switch {
		case err == nil:
			last = state
		case ctx.Err() == nil:
			last = fmt.Sprintf("%s (error: %v)", state, err)
		default:
			// Cut short by the timeout itself: what was seen before says more.
		}
		return done, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v; last seen: %s", timeout, what, err, last)
	}
}

// ctx is a context for one API call of the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func startControlPlane(t *testing.T, bins controlPlaneBinaries) *controlPlane {
	t.Helper()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	s := startServer(t, dataDir)
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{s: s, dir: dir, cfg: cfg, cs: cs, k: &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(dir, "kubectl-cache")}}

	// kgate dev's PKI (deploy/pki, deploy/devcluster): its CA signs what
	// the CSR signer issues; its service-account key signs the legacy
	// token Secrets, so kgate validates them.
	caCert, caKey := filepath.Join(dataDir, "ca.crt"), filepath.Join(dataDir, "ca.key")
	saKey := filepath.Join(dataDir, "sa.key")
	cp.components = append(cp.components, startComponent(t, "kube-controller-manager", bins.kcm,
		"--kubeconfig", s.kubeconfig,
		"--controllers", "*",
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file", caCert, "--cluster-signing-key-file", caKey,
		"--service-account-private-key-file", saKey,
		"--root-ca-file", caCert,
		"--secure-port", "0",
		"--v", "2"))
	cp.components = append(cp.components, startComponent(t, "kube-scheduler", bins.scheduler,
		"--kubeconfig", s.kubeconfig,
		"--secure-port", "0",
		"--v", "2"))
	kwokAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cp.components = append(cp.components, startComponent(t, "kwok", bins.kwok,
		"--kubeconfig", s.kubeconfig,
		"--config", kwokStages(t, dir),
		"--manage-all-nodes=true",
		"--server-address", kwokAddr,
		"--node-lease-duration-seconds", "40"))

	for _, name := range controlPlaneNodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		}}
		if _, err := cs.CoreV1().Nodes().Create(ctx(t), node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cannot create node %s: %v", name, err)
		}
	}
	cp.waitFor(t, 2*time.Minute, "the nodes to be Ready and schedulable", func(ctx context.Context) (bool, string, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var states []string
		ready := 0
		for _, n := range nodes.Items {
			r := nodeReady(&n)
			states = append(states, fmt.Sprintf("%s Ready=%s taints=%v", n.Name, r, n.Spec.Taints))
			if r == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
				ready++
			}
		}
		return ready == len(controlPlaneNodes), strings.Join(states, "; "), nil
	})
	return cp
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// TestControlPlane runs the upstream kube-controller-manager and
// kube-scheduler, and kwok for three fake nodes, against kgate dev, and
// checks that the workloads and housekeeping of a cluster work end to end.
func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts kgate dev and a whole control plane; skipped under -short")
	}
	bins := controlPlaneBins(t)
	cp := startControlPlane(t, bins)
	heartbeats := cp.watchHeartbeats(t)
	cronJob := cp.createCronJob(t)

	t.Run("deployment scheduled and running", cp.testDeployment)
	t.Run("rolling update", cp.testRollingUpdate)
	t.Run("job completes", cp.testJob)
	t.Run("namespace deletion", cp.testNamespaceDeletion)
	t.Run("foreground cascading deletion", cp.testForegroundDeletion)
	t.Run("drain respects PDB", cp.testDrain)
	t.Run("CSR approved and signed", cp.testCSR)
	t.Run("service account token", cp.testServiceAccountToken)
	t.Run("NodePort", cp.testNodePort)
	t.Run("cronjob fires", func(t *testing.T) { cp.testCronJob(t, cronJob) })
	t.Run("node heartbeats", func(t *testing.T) { heartbeats.check(t, cp) })
}

// heartbeats watches the nodes from the moment they are Ready and records
// every time one is seen not Ready.
type heartbeats struct {
	start  time.Time
	leases map[string]time.Time // each node Lease's renewTime at start
	ended  chan struct{}        // closed when the watch goroutine ended
	mu     sync.Mutex           // guards lapses
	lapses []string
	err    error // why the watch ended early; read after ended
}

func (cp *controlPlane) watchHeartbeats(t *testing.T) *heartbeats {
	t.Helper()
	h := &heartbeats{start: time.Now(), leases: map[string]time.Time{}, ended: make(chan struct{})}
	for _, name := range controlPlaneNodes {
		l, err := cp.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s has no Lease in %s: %v", name, corev1.NamespaceNodeLease, err)
		}
		h.leases[name] = leaseRenewed(l)
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	w, err := cp.cs.CoreV1().Nodes().Watch(watchCtx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("cannot watch nodes: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); cancel(); w.Stop(); <-h.ended })
	go func() {
		defer close(h.ended)
		for {
			select {
			case <-done:
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					select {
					case <-done:
					default:
						h.err = fmt.Errorf("the node watch ended after %s", time.Since(h.start).Round(time.Second))
					}
					return
				}
				if n, ok := ev.Object.(*corev1.Node); ok && nodeReady(n) != corev1.ConditionTrue {
					h.mu.Lock()
					h.lapses = append(h.lapses, fmt.Sprintf("%s %s Ready=%s after %s", ev.Type, n.Name, nodeReady(n), time.Since(h.start).Round(time.Second)))
					h.mu.Unlock()
				}
			}
		}
	}()
	return h
}

func leaseRenewed(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// check waits until the nodes have been watched for heartbeatWindow, then
// expects no lapse, every node still Ready, and every Lease renewed since.
func (h *heartbeats) check(t *testing.T, cp *controlPlane) {
	if rest := heartbeatWindow - time.Since(h.start); rest > 0 {
		t.Logf("watching the nodes %s more (the window is %s)", rest.Round(time.Second), heartbeatWindow)
		select {
		case <-time.After(rest):
		case <-h.ended:
		}
	}
	cp.alive(t)
	select {
	case <-h.ended:
		t.Fatalf("the node watch ended early: %v", h.err)
	default:
	}
	nodes, err := cp.cs.CoreV1().Nodes().List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if r := nodeReady(&n); r != corev1.ConditionTrue {
			t.Errorf("node %s is Ready=%s after %s", n.Name, r, time.Since(h.start).Round(time.Second))
		}
	}
	for name, first := range h.leases {
		l, err := cp.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("lease of %s: %v", name, err)
			continue
		}
		if !leaseRenewed(l).After(first.Add(time.Minute)) {
			t.Errorf("lease of %s renewed at %s, not a minute past %s", name, leaseRenewed(l), first)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lapses) > 0 {
		t.Errorf("nodes were seen not Ready during %s: %s", heartbeatWindow, strings.Join(h.lapses, "; "))
	}
}

// namespace creates a namespace for one check and waits for its default
// ServiceAccount (made by kube-controller-manager's serviceaccount
// controller), without which the ServiceAccount admission rejects pods.
func (cp *controlPlane) namespace(t *testing.T, name string) {
	t.Helper()
	if _, err := cp.cs.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create namespace %s: %v", name, err)
	}
	cp.waitFor(t, time.Minute, "the default ServiceAccount of "+name, func(ctx context.Context) (bool, string, error) {
		_, err := cp.cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		return err == nil, "", err
	})
}
