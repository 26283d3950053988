package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/deploy/fakekubelet"
	"github.com/kgate/kgate/deploy/testca"
)

// metricsServerNamespace and metricsServerService are the Service (and
// the serving certificate name, <service>.<namespace>.svc) of
// metrics-server's own manifests.
const (
	metricsServerNamespace = "kube-system"
	metricsServerService   = "metrics-server"
)

// metricsTopTimeout bounds the wait for `kubectl top` to show the
// configured usage: metrics-server reports a rate once it has scraped
// the kubelet twice, --metric-resolution (10s, its least) apart.
const metricsTopTimeout = 90 * time.Second

// TestMetricsServer runs the real metrics-server (sigs.k8s.io/metrics-server,
// built from cmd/metrics-server) as a separate process against kgate dev,
// registered as metrics-server's own manifests register it: the
// APIService v1beta1.metrics.k8s.io on a Service in kube-system (an
// ExternalName of localhost here, as upstream's validation refuses
// loopback endpoints). metrics-server delegates authentication and
// authorization to kgate, trusts the front-proxy certificate kgate dev
// makes by default (no front-proxy flags) from kgate's
// extension-apiserver-authentication ConfigMap, follows the
// Running pods and the nodes through kgate, and scrapes the fake
// kubelet of the test (/metrics/resource, at the node's InternalIP and
// kubelet port). The real kubectl then shows, through kgate, the usage
// the kubelet was configured with: `kubectl top pods`, `kubectl top pod
// --containers` and `kubectl top nodes`.
func TestMetricsServer(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary and metrics-server; skipped under -short")
	}
	bin := metricsServerBinary(t)
	dir := t.TempDir()

	// The kubelet's certificates (metrics-server → kubelet). The front
	// proxy's (kgate → metrics-server) are kgate dev's own, made without
	// flags as kubeadm makes kube-apiserver's.
	kubeletPKI, err := fakekubelet.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := fakekubelet.Start(kubeletPKI)
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	const mi, gi = 1 << 20, 1 << 30
	kubelet.SetUsage(fakekubelet.Usage{NodeCPU: 1.5, NodeMemory: 2 * gi, Containers: []fakekubelet.ContainerUsage{
		{Namespace: "metrics", Pod: "app", Container: "main", CPU: 0.25, Memory: 64 * mi},
		{Namespace: "metrics", Pod: "app", Container: "sidecar", CPU: 0.1, Memory: 16 * mi},
		{Namespace: "metrics", Pod: "web", Container: "nginx", CPU: 0.05, Memory: 32 * mi},
	}})

	// metrics-server's serving certificate, for the name kgate's proxy
	// checks; the APIService's caBundle is its CA.
	servingCA, err := testca.New("metrics-server-ca")
	if err != nil {
		t.Fatal(err)
	}
	servCert, servKey, err := servingCA.Server("metrics-server", metricsServerService+"."+metricsServerNamespace+".svc", "localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	servCertFile, servKeyFile := filepath.Join(dir, "metrics-server.crt"), filepath.Join(dir, "metrics-server.key")
	for f, data := range map[string][]byte{servCertFile: servCert, servKeyFile: servKey} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	s := startServer(t, filepath.Join(dir, "data"), "--aggregator-allow-loopback-targets")
	k := &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(dir, "cache")}

	// The node (allocatable 4 cores, 8Gi: kubectl top nodes' percentages)
	// and the pods metrics-server follows: those Running.
	objects := filepath.Join(dir, "objects.yaml")
	if err := os.WriteFile(objects, []byte(`apiVersion: v1
kind: Node
metadata:
  name: metrics-node
---
apiVersion: v1
kind: Namespace
metadata:
  name: metrics
---
apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: metrics
spec:
  nodeName: metrics-node
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
  - name: sidecar
    image: registry.k8s.io/pause:3.10
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: metrics
spec:
  nodeName: metrics-node
  containers:
  - name: nginx
    image: registry.k8s.io/pause:3.10
`), 0o600); err != nil {
		t.Fatal(err)
	}
	k.ok(t, "apply", "-f", objects)
	k.ok(t, "patch", "node", "metrics-node", "--subresource=status", "--type=merge", "-p", fmt.Sprintf(
		`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":%d}},`+
			`"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"}}}`, kubelet.Port()))
	for _, pod := range []string{"app", "web"} {
		k.ok(t, "patch", "pod", pod, "-n", "metrics", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Running"}}`)
	}

	// metrics-server, with the flags of its own manifest that apply here
	// (the kubelet's address and port from the node's status) and the
	// files its Deployment would mount.
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(addr, ":")
	ms := startComponent(t, "metrics-server", bin,
		"--secure-port="+port, "--bind-address=127.0.0.1",
		"--tls-cert-file="+servCertFile, "--tls-private-key-file="+servKeyFile,
		"--kubeconfig="+s.kubeconfig, "--authentication-kubeconfig="+s.kubeconfig, "--authorization-kubeconfig="+s.kubeconfig,
		"--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port",
		"--kubelet-certificate-authority="+kubeletPKI.CAFile,
		"--kubelet-client-certificate="+kubeletPKI.ClientCertFile, "--kubelet-client-key="+kubeletPKI.ClientKeyFile,
		// Its least resolution; a scrape must take less.
		"--metric-resolution=10s", "--kubelet-request-timeout=5s", "--v=2")

	// The APIService of metrics-server's manifest, on a Service of
	// localhost.
	registration := filepath.Join(dir, "apiservice.yaml")
	if err := os.WriteFile(registration, []byte(fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  type: ExternalName
  externalName: localhost
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: %[4]s
  service:
    namespace: %[2]s
    name: %[1]s
    port: %[3]s
`, metricsServerService, metricsServerNamespace, port, base64.StdEncoding.EncodeToString(servingCA.PEM))), 0o600); err != nil {
		t.Fatal(err)
	}
	k.ok(t, "apply", "-f", registration)
	// Waited for in rounds, so that a metrics-server that exits is seen
	// at once.
	for until := time.Now().Add(60 * time.Second); ; {
		r := k.run("wait", "--for=condition=Available", "apiservice/v1beta1.metrics.k8s.io", "--timeout=5s")
		if r.err == nil {
			break
		}
		ms.alive(t)
		if time.Now().After(until) {
			t.Fatalf("%s\nthe APIService: %s", r, k.run("get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "yaml").stdout)
		}
	}

	// kubectl top asks discovery for metrics.k8s.io; api-resources
	// refreshes kubectl's discovery cache, which predates the group.
	deadline := time.Now().Add(metricsTopTimeout)
	eventuallyTop(t, k, ms, deadline, "pods and nodes in kubectl api-resources", func(out string) bool {
		return strings.Contains(out, "pods.metrics.k8s.io") && strings.Contains(out, "nodes.metrics.k8s.io")
	}, "api-resources", "--api-group", "metrics.k8s.io", "-o", "name")

	// CPU is a rate metrics-server derives from two scrapes of the
	// kubelet's counters: within 10m of the configured one. Memory is
	// the working set as configured, exactly.
	checkCPU := func(what, got string, want int) {
		t.Helper()
		m, ok := strings.CutSuffix(got, "m")
		n, err := strconv.Atoi(m)
		if !ok || err != nil || n < want-10 || n > want+10 {
			t.Errorf("%s: CPU %q, want %dm ± 10m", what, got, want)
		}
	}
	rows := func(out string) map[string]bool {
		names := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 0 {
				names[f[0]] = true
			}
		}
		return names
	}

	out := eventuallyTop(t, k, ms, deadline, "both pods in kubectl top pods", func(out string) bool {
		r := rows(out)
		return r["app"] && r["web"]
	}, "top", "pods", "-n", "metrics")
	t.Logf("kubectl top pods -n metrics:\n%s", out)
	tb := parseTable(t, out)
	tb.checkHeader(t, "NAME", "CPU(cores)", "MEMORY(bytes)")
	for _, p := range []struct {
		name   string
		cpu    int
		memory string
	}{{"app", 350, "80Mi"}, {"web", 50, "32Mi"}} {
		row := tb.row(t, "NAME", p.name)
		checkCPU("kubectl top pods: "+p.name, row["CPU(cores)"], p.cpu)
		checkRow(t, row, map[string]string{"MEMORY(bytes)": p.memory})
	}

	out = k.ok(t, "top", "pod", "app", "-n", "metrics", "--containers")
	t.Logf("kubectl top pod app -n metrics --containers:\n%s", out)
	tb = parseTable(t, out)
	tb.checkHeader(t, "POD", "NAME", "CPU(cores)", "MEMORY(bytes)")
	for _, c := range []struct {
		name   string
		cpu    int
		memory string
	}{{"main", 250, "64Mi"}, {"sidecar", 100, "16Mi"}} {
		row := tb.row(t, "NAME", c.name)
		checkCPU("kubectl top pod app --containers: "+c.name, row["CPU(cores)"], c.cpu)
		checkRow(t, row, map[string]string{"POD": "app", "MEMORY(bytes)": c.memory})
	}
	if len(tb.rows) != 2 {
		t.Errorf("kubectl top pod app --containers: %d rows, want 2: %q", len(tb.rows), tb.rows)
	}

	out = eventuallyTop(t, k, ms, deadline, "the node in kubectl top nodes", func(out string) bool {
		return rows(out)["metrics-node"]
	}, "top", "nodes")
	t.Logf("kubectl top nodes:\n%s", out)
	tb = parseTable(t, out)
	tb.checkHeader(t, "NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)")
	row := tb.row(t, "NAME", "metrics-node")
	checkCPU("kubectl top nodes", row["CPU(cores)"], 1500)
	checkRow(t, row, map[string]string{"CPU(%)": "37%", "MEMORY(bytes)": "2048Mi", "MEMORY(%)": "25%"})

	// metrics-server reached the kubelet with the client certificate it
	// was given.
	scraped := false
	for _, r := range kubelet.Requests() {
		if r.Path == "/metrics/resource" {
			scraped = true
			if r.ClientCN != "kube-apiserver-kubelet-client" {
				t.Errorf("metrics-server scraped the kubelet as %q", r.ClientCN)
			}
		}
	}
	if !scraped {
		t.Error("the kubelet saw no scrape")
	}
	ms.alive(t)
}

// eventuallyTop runs kubectl until check accepts its output or the
// deadline passes; metrics-server must keep running meanwhile.
func eventuallyTop(t *testing.T, k *kubectl, ms *role, deadline time.Time, what string, check func(string) bool, args ...string) string {
	t.Helper()
	for {
		r := k.run(args...)
		if r.err == nil && check(r.stdout) {
			return r.stdout
		}
		ms.alive(t)
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, metricsTopTimeout, r)
		}
		time.Sleep(time.Second) // kubectl is a process: nothing to wait on but another run
	}
}

// msBin is the metrics-server under test: METRICS_SERVER_BIN, or one
// built from cmd/metrics-server on first use.
var msBin struct {
	once sync.Once
	path string
	err  error
}

func metricsServerBinary(t *testing.T) string {
	t.Helper()
	msBin.once.Do(func() {
		if msBin.path = os.Getenv("METRICS_SERVER_BIN"); msBin.path != "" {
			return
		}
		root, err := moduleRoot()
		if err != nil {
			msBin.err = err
			return
		}
		msBin.path = filepath.Join(binDir, "metrics-server")
		// cmd/metrics-server is its own module; the command is the one
		// of cmd/metrics-server/README.md.
		msBin.err = goBuild(filepath.Join(root, "cmd", "metrics-server"), []string{"CGO_ENABLED=0"},
			"-trimpath", "-ldflags", metricsServerLDFlags, "-o", msBin.path, "sigs.k8s.io/metrics-server/cmd/metrics-server")
	})
	if msBin.err != nil {
		t.Fatalf("cannot build metrics-server: %v", msBin.err)
	}
	return msBin.path
}

// metricsServerLDFlags are those of the Makefile (METRICS_SERVER_LDFLAGS):
// metrics-server's version.
const metricsServerLDFlags = "-s -w -X k8s.io/client-go/pkg/version.gitVersion=v0.8.0"
