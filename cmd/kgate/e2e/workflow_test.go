package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The objects of the workflow.
const (
	ns         = "e2e"
	deployName = "web"
	svcName    = "web"
	cmName     = "web-config"
	secretName = "web-secret"
)

// manifest is what a user applies: a Deployment, a Service, a ConfigMap
// and a Secret given as stringData.
const manifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: e2e
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: e2e
  labels:
    app: web
spec:
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: e2e
  labels:
    app: web
data:
  color: blue
  size: large
---
apiVersion: v1
kind: Secret
metadata:
  name: web-secret
  namespace: e2e
  labels:
    app: web
stringData:
  password: s3cret
`

// env is what the steps of the workflow share.
type env struct {
	srv      *server
	k        *kubectl
	scratch  string // files the steps write (manifests)
	manifest string // path of manifest
}

// writeFile writes a file in the scratch directory and returns its path.
func (e *env) writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(e.scratch, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKubectl is a user's session: start kgate dev, work with kubectl,
// restart kgate dev, keep working, stop it. Each step is a subtest and
// runs on the state the previous steps left; a step that kills kgate dev
// fails and the next steps run on a restarted kgate dev.
func TestKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary and drives it with kubectl; skipped under -short")
	}
	root := t.TempDir()
	e := &env{scratch: filepath.Join(root, "scratch")}
	for _, d := range []string{e.scratch, filepath.Join(root, "kubectl-cache")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.srv = startServer(t, filepath.Join(root, "data"))
	e.k = &kubectl{kubeconfig: e.srv.kubeconfig, cacheDir: filepath.Join(root, "kubectl-cache")}
	e.manifest = e.writeFile(t, "manifest.yaml", manifest)

	steps := []struct {
		name string
		run  func(*testing.T, *env)
	}{
		{"startup", testStartup},
		{"create namespace", testCreateNamespace},
		{"apply", testApply},
		{"get", testGet},
		{"watch", testWatch},
		{"label and annotate", testLabelAnnotate},
		{"patch", testPatch},
		{"replace", testReplace},
		{"scale", testScale},
		{"create errors", testCreateErrors},
		{"control plane objects", testControlPlaneObjects},
		{"discovery", testDiscovery},
		{"cli", testCLI},
		{"explain", testExplain},
		{"auth", testAuth},
		{"restart", testRestart},
		{"delete", testDelete},
		{"shutdown", testShutdown},
	}
	for i, s := range steps {
		t.Run(strconv.Itoa(i)+" "+s.name, func(t *testing.T) {
			s.run(t, e)
			if s.name != "shutdown" {
				e.srv.checkAlive(t)
			}
		})
	}
}

// testStartup checks what kgate dev printed and its health endpoints.
func testStartup(t *testing.T, e *env) {
	s := e.srv
	if want := "https://" + s.addr; s.servingURL != want {
		t.Errorf("kgate dev printed serving URL %q, want %q", s.servingURL, want)
	}
	// README.md: the kubeconfig lives in the data directory.
	if want := filepath.Join(s.dataDir, "kubeconfig"); s.kubeconfig != want {
		t.Errorf("kgate dev printed kubeconfig %q, want %q", s.kubeconfig, want)
	}
	if want := "kubectl --kubeconfig " + s.kubeconfig + " get namespaces"; s.tryLine != want {
		t.Errorf("kgate dev printed try line %q, want %q", s.tryLine, want)
	}
	if fi, err := os.Stat(s.kubeconfig); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, want 0600 (it holds the admin key)", fi.Mode().Perm())
	}
	for _, path := range []string{"/readyz", "/livez", "/healthz"} {
		if out := e.k.ok(t, "get", "--raw", path); out != "ok" {
			t.Errorf("GET %s = %q, want \"ok\"", path, out)
		}
	}
	// ?verbose lists every check, as kube-apiserver does.
	out := e.k.ok(t, "get", "--raw", "/readyz?verbose")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "readyz check passed" || !slices.Contains(lines, "[+]etcd ok") {
		t.Errorf("GET /readyz?verbose = %q, want [+]<check> ok lines with [+]etcd ok, then \"readyz check passed\"", out)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "[+]") || !strings.HasSuffix(l, " ok") {
			t.Errorf("GET /readyz?verbose: line %q, want [+]<check> ok", l)
		}
	}
}

// testShutdown stops kgate dev: SIGTERM must make it exit, cleanly, within
// a few seconds.
func testShutdown(t *testing.T, e *env) {
	if err := e.srv.stop(); err != nil {
		t.Fatal(err)
	}
}
