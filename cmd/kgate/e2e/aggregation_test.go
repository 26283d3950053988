package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/deploy/sampleext"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestAggregation runs kgate dev as the aggregator of Kubernetes' own
// sample extension API server (k8s.io/sample-apiserver's wardle server,
// deploy/sampleext, on loopback, delegating authentication and
// authorization to kgate; its Service an ExternalName of localhost, as
// upstream's validation refuses loopback endpoints) and drives it with
// the real kubectl: the
// APIService turns Available (kgate's availability checker), kubectl
// api-resources lists flunders (kgate's discovery merge), kubectl
// explain describes them and /openapi/v2 holds them (kgate's OpenAPI
// merge), kubectl
// creates, gets and watches flunders through kgate's proxy, a user
// allowed only through a group reaches the server as that user and group
// over the front-proxy certificate, and once the server stops its
// APIService turns Available=False and its requests answer 503 while the
// rest of the API keeps working.
func TestAggregation(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary; skipped under -short")
	}
	dir := t.TempDir()
	pki, err := sampleext.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(dir, "data"),
		"--proxy-client-cert-file", pki.ProxyClientCertFile, "--proxy-client-key-file", pki.ProxyClientKeyFile,
		"--requestheader-client-ca-file", pki.FrontProxyCAFile, "--requestheader-allowed-names", sampleext.FrontProxyName,
		"--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--aggregator-allow-loopback-targets")
	k := &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(dir, "cache")}

	etcd := storagetest.StartServer(t)
	var extLog syncBuffer
	ext, err := sampleext.Start(sampleext.Config{PKI: pki, Kubeconfig: s.kubeconfig, EtcdServers: etcd.Endpoints(), Out: &extLog})
	if err != nil {
		t.Fatalf("%v\nwardle server log:\n%s", err, extLog.tail(100))
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = ext.Stop()
		}
		if t.Failed() {
			t.Logf("wardle server log (last 100 lines):\n%s", extLog.tail(100))
		}
	})

	manifest := filepath.Join(dir, "wardle.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Service
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  type: ExternalName
  externalName: localhost
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: %[4]s.%[5]s
spec:
  group: %[5]s
  version: %[4]s
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: %[6]s
  service:
    namespace: %[1]s
    name: %[2]s
    port: %[3]d
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: flunder-reader
rules:
- apiGroups: ["%[5]s"]
  resources: ["flunders"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: flunder-readers
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: flunder-reader
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: flunder-readers
`, sampleext.ServiceNamespace, sampleext.ServiceName, ext.Port(), sampleext.Version, sampleext.Group,
		base64.StdEncoding.EncodeToString(pki.ServingCA))), 0o600); err != nil {
		t.Fatal(err)
	}
	k.ok(t, "apply", "-f", manifest)
	apiService := "apiservice/" + sampleext.Version + "." + sampleext.Group
	k.ok(t, "wait", "--for=condition=Available", apiService, "--timeout=40s")

	// Every gateway fetches the new group's discovery within a second or
	// so of the APIService's change.
	eventuallyOut(t, k, "flunders in kubectl api-resources", func(out string) bool {
		return strings.Contains(out, "flunders.wardle.example.com") && strings.Contains(out, "fischers.wardle.example.com")
	}, "api-resources", "--api-group", sampleext.Group, "-o", "name")

	// kgate's OpenAPI documents include the server's: kubectl explain
	// reads its v3 document through kgate's index, and /openapi/v2
	// holds its paths and definitions.
	eventuallyOut(t, k, "kubectl explain of flunders' spec", func(out string) bool {
		return strings.Contains(out, "KIND:       Flunder") && strings.Contains(out, "reference\t<string>")
	}, "explain", "flunders.spec", "--api-version", sampleext.Group+"/"+sampleext.Version)
	eventuallyOut(t, k, "flunders in /openapi/v2", func(out string) bool {
		return strings.Contains(out, `"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"`) &&
			strings.Contains(out, `"io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.Flunder"`) &&
			strings.Contains(out, `"/api/v1/namespaces"`)
	}, "get", "--raw", "/openapi/v2")

	// wardle marks its v1alpha1 deprecated: kubectl prints the warning
	// the server sent through the proxy, and nothing else.
	const deprecated = "Warning: wardle.example.com/v1alpha1 Flunder is deprecated in v1.3+, unavailable in v1.10+\n"
	okWarned := func(args ...string) string {
		t.Helper()
		r := k.run(args...)
		if r.err != nil || r.stderr != deprecated {
			t.Fatalf("want success with wardle's deprecation warning alone: %s", r)
		}
		return r.stdout
	}
	flunder := func(name string) string {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte(fmt.Sprintf("apiVersion: %s/%s\nkind: Flunder\nmetadata:\n  name: %s\n  namespace: default\n",
			sampleext.Group, sampleext.Version, name)), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	okWarned("create", "-f", flunder("first"))
	if out := okWarned("get", "flunders", "-n", "default", "-o", "name"); strings.TrimSpace(out) != "flunder.wardle.example.com/first" {
		t.Fatalf("kubectl get flunders: %q", out)
	}

	// A watch through the proxy streams the next one as it comes (kubectl
	// watches from its list's resourceVersion: once the list is printed,
	// nothing created after it is missed).
	w := k.start(t, false, "get", "flunders", "-n", "default", "--watch", "-o", "name")
	if got := w.next(t, 30*time.Second, "the listed flunder"); got != "flunder.wardle.example.com/first" {
		t.Fatalf("watch: listed %q, want flunder.wardle.example.com/first", got)
	}
	okWarned("create", "-f", flunder("second"))
	if got := w.next(t, 30*time.Second, "the watched flunder"); got != "flunder.wardle.example.com/second" {
		t.Errorf("watch: %q, want flunder.wardle.example.com/second", got)
	}

	// alice may read flunders only as a member of flunder-readers: the
	// wardle server's own access review allows her only if her user and
	// group reached it through the front-proxy certificate.
	if out := okWarned("get", "flunders", "-n", "default", "-o", "name", "--as", "alice", "--as-group", "flunder-readers"); !strings.Contains(out, "first") {
		t.Errorf("alice in flunder-readers: %q", out)
	}
	r := k.fails(t, "get", "flunders", "-n", "default", "--as", "bob")
	if !strings.Contains(r.stderr, `User "bob" cannot list resource "flunders"`) {
		t.Errorf("bob: %s", r)
	}

	// The server stops: Available=False within the checker's resync, its
	// requests 503, the rest of the API unharmed.
	stopped = true
	if err := ext.Stop(); err != nil {
		t.Fatal(err)
	}
	k.ok(t, "wait", "--for=condition=Available=False", apiService, "--timeout=45s")
	r = k.fails(t, "get", "flunders", "-n", "default")
	if !strings.Contains(r.stderr, "ServiceUnavailable") {
		t.Errorf("a flunder read with the server gone: %s", r)
	}
	if r := k.run("get", "namespaces", "-o", "name"); r.err != nil || !strings.Contains(r.stdout, "namespace/wardle") {
		t.Errorf("the rest of the API with the extension server gone: %s", r)
	}
}

// eventuallyOut runs kubectl until check accepts its output, for up to
// 30s.
func eventuallyOut(t *testing.T, k *kubectl, what string, check func(string) bool, args ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := k.run(args...)
		if r.err == nil && check(r.stdout) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s; last: %s", what, r)
		}
		time.Sleep(500 * time.Millisecond) // kubectl is a process: nothing to wait on but another run
	}
}
