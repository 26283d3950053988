package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const helmTimeout = 2 * time.Minute // a whole helm run

// helmChart is a small chart: a Deployment, a Service, a ConfigMap and a
// Secret, each named after the release and filled from the values.
var helmChart = map[string]string{
	"Chart.yaml": `apiVersion: v2
name: web
description: kgate's end-to-end chart
type: application
version: 0.1.0
appVersion: "1.25"
`,
	"values.yaml": `replicas: 1
image: nginx:1.25
port: 80
color: blue
password: s3cret
`,
	"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels:
    app: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app: {{ .Release.Name }}
    spec:
      containers:
      - name: web
        image: {{ .Values.image }}
        ports:
        - containerPort: {{ .Values.port }}
        envFrom:
        - configMapRef:
            name: {{ .Release.Name }}-config
`,
	"templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
  labels:
    app: {{ .Release.Name }}
spec:
  selector:
    app: {{ .Release.Name }}
  ports:
  - port: {{ .Values.port }}
    targetPort: {{ .Values.port }}
`,
	"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
  labels:
    app: {{ .Release.Name }}
data:
  color: {{ .Values.color | quote }}
`,
	"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-secret
  labels:
    app: {{ .Release.Name }}
type: Opaque
data:
  password: {{ .Values.password | b64enc }}
`,
}

// helmValues are the values a release's objects are checked against.
type helmValues struct {
	replicas int32
	image    string
	port     int32
	color    string
	password string
}

func (v helmValues) setFlags() []string {
	return []string{
		"--set", "replicas=" + strconv.Itoa(int(v.replicas)),
		"--set", "image=" + v.image,
		"--set", "port=" + strconv.Itoa(int(v.port)),
		"--set", "color=" + v.color,
		"--set", "password=" + v.password,
	}
}

// TestHelm installs, upgrades, lists and uninstalls a chart with the
// pinned upstream helm v4 (cmd/helm) against kgate dev: once with helm's
// default, server-side apply, and once with client-side apply
// (--server-side=false), each as its own release.
func TestHelm(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary and drives it with helm; skipped under -short")
	}
	bin := helmBinary(t)
	root := t.TempDir()
	chart := filepath.Join(root, "chart")
	for name, content := range helmChart {
		p := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, filepath.Join(root, "data"))
	h := &helm{bin: bin, kubeconfig: srv.kubeconfig, home: filepath.Join(root, "helm-home")}
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		release, namespace string
		serverSide         bool
		flags              []string // install and upgrade flags
	}{
		{release: "ssa", namespace: "helm-ssa", serverSide: true},
		{release: "csa", namespace: "helm-csa", serverSide: false, flags: []string{"--server-side=false"}},
	} {
		t.Run(tc.release, func(t *testing.T) {
			r := helmRelease{h: h, cs: cs, name: tc.release, namespace: tc.namespace, serverSide: tc.serverSide}
			v1 := helmValues{replicas: 1, image: "nginx:1.25", port: 80, color: "blue", password: "s3cret"}
			t.Run("install", func(t *testing.T) {
				h.ok(t, append([]string{"install", r.name, chart, "-n", r.namespace, "--create-namespace"}, tc.flags...)...)
				r.checkObjects(t, v1)
				r.checkReleases(t, map[int]string{1: "deployed"})
				r.checkStatus(t, 1)
			})
			srv.checkAlive(t)
			v2 := helmValues{replicas: 3, image: "nginx:1.27", port: 8080, color: "green", password: "n3w"}
			t.Run("upgrade", func(t *testing.T) {
				h.ok(t, append(append([]string{"upgrade", r.name, chart, "-n", r.namespace}, tc.flags...), v2.setFlags()...)...)
				r.checkObjects(t, v2)
				r.checkReleases(t, map[int]string{1: "superseded", 2: "deployed"})
				r.checkStatus(t, 2)
			})
			srv.checkAlive(t)
			revision := "2"
			if tc.serverSide {
				revision = "4"
				t.Run("conflict", func(t *testing.T) { r.testConflict(t, chart, v2) })
				srv.checkAlive(t)
			}
			t.Run("list", func(t *testing.T) {
				var list []struct {
					Name, Namespace, Revision, Status, Chart string
					AppVersion                               string `json:"app_version"`
				}
				h.json(t, &list, "list", "-n", r.namespace)
				if len(list) != 1 {
					t.Fatalf("helm list -n %s: %d releases, want 1: %+v", r.namespace, len(list), list)
				}
				l := list[0]
				if l.Name != r.name || l.Namespace != r.namespace || l.Revision != revision || l.Status != "deployed" || l.Chart != "web-0.1.0" || l.AppVersion != "1.25" {
					t.Errorf("helm list: %+v, want %s in %s, revision %s, deployed, chart web-0.1.0, app version 1.25", l, r.name, r.namespace, revision)
				}
				var all []struct{ Name, Namespace string }
				h.json(t, &all, "list", "--all-namespaces")
				if !slices.ContainsFunc(all, func(x struct{ Name, Namespace string }) bool {
					return x.Name == r.name && x.Namespace == r.namespace
				}) {
					t.Errorf("helm list --all-namespaces has no %s/%s: %+v", r.namespace, r.name, all)
				}
			})
			t.Run("uninstall", func(t *testing.T) {
				// --wait (helm's watcher strategy) lists and watches each
				// kind until the deleted objects are gone; nothing here
				// needs a kubelet.
				out := h.ok(t, "uninstall", r.name, "-n", r.namespace, "--wait", "--timeout", "60s")
				if want := fmt.Sprintf("release \"%s\" uninstalled\n", r.name); out != want {
					t.Errorf("helm uninstall printed %q, want %q", out, want)
				}
				r.checkGone(t)
				for _, flags := range [][]string{nil, {"--uninstalled"}} {
					var list []json.RawMessage
					h.json(t, &list, append([]string{"list", "-n", r.namespace}, flags...)...)
					if len(list) != 0 {
						t.Errorf("helm list %s after uninstall: %s", flags, list)
					}
				}
			})
			srv.checkAlive(t)
		})
	}
}

// helmRelease is one release under test and what checks it.
type helmRelease struct {
	h               *helm
	cs              kubernetes.Interface
	name, namespace string
	serverSide      bool
}

// testConflict has another manager change a field the release applied:
// helm's next upgrade fails on the server's apply conflict (409, naming
// the manager and the field) and writes nothing; with --force-conflicts
// helm takes the field back.
func (r helmRelease) testConflict(t *testing.T, chart string, v helmValues) {
	ctx := context.Background()
	cm, err := r.cs.CoreV1().ConfigMaps(r.namespace).Get(ctx, r.name+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot get the ConfigMap: %v", err)
	}
	cm.Data["color"] = "red"
	if _, err := r.cs.CoreV1().ConfigMaps(r.namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "e2e-editor"}); err != nil {
		t.Fatalf("cannot update the ConfigMap as e2e-editor: %v", err)
	}
	v3 := v
	v3.color, v3.replicas = "yellow", 2
	upgrade := append([]string{"upgrade", r.name, chart, "-n", r.namespace}, v3.setFlags()...)
	res := r.h.run(upgrade...)
	if res.err == nil {
		t.Fatalf("helm upgrade over e2e-editor's color succeeded, want an apply conflict; stdout:\n%s", res.stdout)
	}
	t.Logf("helm upgrade failed as it should: %s", strings.TrimSpace(res.stderr))
	for _, want := range []string{"conflict", `"e2e-editor"`, ".data.color"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("helm upgrade's error says no %q:\n%s", want, res.stderr)
		}
	}
	got, err := r.cs.CoreV1().ConfigMaps(r.namespace).Get(ctx, r.name+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot get the ConfigMap: %v", err)
	}
	if got.Data["color"] != "red" || !owns(got.ManagedFields, "e2e-editor Update", "f:data/f:color") {
		t.Errorf("after the conflict: color %q, managers %q; want red, owned by e2e-editor", got.Data["color"], managers(got.ManagedFields))
	}
	r.checkReleases(t, map[int]string{1: "superseded", 2: "deployed", 3: "failed"})

	r.h.ok(t, append(upgrade, "--force-conflicts")...)
	r.checkObjects(t, v3)
	r.checkReleases(t, map[int]string{1: "superseded", 2: "superseded", 3: "failed", 4: "deployed"})
	r.checkStatus(t, 4)
	got, err = r.cs.CoreV1().ConfigMaps(r.namespace).Get(ctx, r.name+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot get the ConfigMap: %v", err)
	}
	if owns(got.ManagedFields, "e2e-editor", "f:data/f:color") || !owns(got.ManagedFields, "helm Apply", "f:data/f:color") {
		t.Errorf("after --force-conflicts: managers %q; want data.color owned by helm's Apply only", managers(got.ManagedFields))
	}
}

// checkObjects checks that the chart's four objects hold v, carry helm's
// ownership metadata and name helm as their field manager, with the
// operation of the apply method in use.
func (r helmRelease) checkObjects(t *testing.T, v helmValues) {
	t.Helper()
	ctx := context.Background()
	d, err := r.cs.AppsV1().Deployments(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot get the Deployment: %v", err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != v.replicas {
		t.Errorf("Deployment replicas %v, want %d", d.Spec.Replicas, v.replicas)
	}
	if c := d.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != v.image || len(c[0].Ports) != 1 || c[0].Ports[0].ContainerPort != v.port {
		t.Errorf("Deployment containers %+v, want one with image %s and port %d", c, v.image, v.port)
	}
	if got := d.Spec.Selector.MatchLabels["app"]; got != r.name {
		t.Errorf("Deployment selector app=%q, want %q", got, r.name)
	}
	r.checkMeta(t, "Deployment", d.ObjectMeta)

	s, err := r.cs.CoreV1().Services(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot get the Service: %v", err)
	}
	if p := s.Spec.Ports; len(p) != 1 || p[0].Port != v.port || p[0].TargetPort.IntVal != v.port || p[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("Service ports %+v, want one TCP port %d", p, v.port)
	}
	if s.Spec.Selector["app"] != r.name || s.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service selector %v type %q, want app=%s ClusterIP", s.Spec.Selector, s.Spec.Type, r.name)
	}
	r.checkMeta(t, "Service", s.ObjectMeta)

	cm, err := r.cs.CoreV1().ConfigMaps(r.namespace).Get(ctx, r.name+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot get the ConfigMap: %v", err)
	}
	if len(cm.Data) != 1 || cm.Data["color"] != v.color {
		t.Errorf("ConfigMap data %v, want color=%s", cm.Data, v.color)
	}
	r.checkMeta(t, "ConfigMap", cm.ObjectMeta)

	sec, err := r.cs.CoreV1().Secrets(r.namespace).Get(ctx, r.name+"-secret", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot get the Secret: %v", err)
	}
	if len(sec.Data) != 1 || string(sec.Data["password"]) != v.password || sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret type %q data %q, want Opaque password=%s", sec.Type, sec.Data, v.password)
	}
	r.checkMeta(t, "Secret", sec.ObjectMeta)
}

// checkMeta checks helm's ownership labels and annotations and the
// managed fields helm's writes left.
func (r helmRelease) checkMeta(t *testing.T, kind string, m metav1.ObjectMeta) {
	t.Helper()
	if m.Labels["app.kubernetes.io/managed-by"] != "Helm" || m.Labels["app"] != r.name {
		t.Errorf("%s labels %v, want app.kubernetes.io/managed-by=Helm and app=%s", kind, m.Labels, r.name)
	}
	if m.Annotations["meta.helm.sh/release-name"] != r.name || m.Annotations["meta.helm.sh/release-namespace"] != r.namespace {
		t.Errorf("%s annotations %v, want meta.helm.sh/release-name=%s, release-namespace=%s", kind, m.Annotations, r.name, r.namespace)
	}
	// Server-side apply leaves an Apply entry of manager "helm"; helm's
	// client-side create and patches leave Update entries of the same
	// manager (kube.ManagedFieldsManager).
	want := metav1.ManagedFieldsOperationUpdate
	if r.serverSide {
		want = metav1.ManagedFieldsOperationApply
	}
	if !slices.ContainsFunc(m.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == "helm" && e.Operation == want
	}) {
		t.Errorf("%s managedFields have no %s entry of manager helm: %q", kind, want, managers(m.ManagedFields))
	}
}

// checkReleases checks helm's release Secrets: one per revision, with the
// status helm gave it, holding the encoded release.
func (r helmRelease) checkReleases(t *testing.T, want map[int]string) {
	t.Helper()
	list, err := r.cs.CoreV1().Secrets(r.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + r.name})
	if err != nil {
		t.Fatalf("cannot list helm's release Secrets: %v", err)
	}
	got := map[int]string{}
	for _, s := range list.Items {
		rev, err := strconv.Atoi(s.Labels["version"])
		if err != nil {
			t.Errorf("release Secret %s: version label %q", s.Name, s.Labels["version"])
			continue
		}
		if wantName := fmt.Sprintf("sh.helm.release.v1.%s.v%d", r.name, rev); s.Name != wantName || s.Type != "helm.sh/release.v1" {
			t.Errorf("release Secret %s of type %q, want %s of type helm.sh/release.v1", s.Name, s.Type, wantName)
		}
		if len(s.Data["release"]) == 0 {
			t.Errorf("release Secret %s holds no release", s.Name)
		} else if _, err := base64.StdEncoding.DecodeString(string(s.Data["release"])); err != nil {
			t.Errorf("release Secret %s: release is not base64 (helm encodes it so): %v", s.Name, err)
		}
		got[rev] = s.Labels["status"]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("release Secrets (revision: status) %v, want %v", got, want)
	}
}

// checkStatus checks `helm status` in JSON and as text.
func (r helmRelease) checkStatus(t *testing.T, revision int) {
	t.Helper()
	var st struct {
		Name, Namespace string
		Version         int
		Info            struct{ Status string }
		Config          map[string]any
	}
	r.h.json(t, &st, "status", r.name, "-n", r.namespace)
	if st.Name != r.name || st.Namespace != r.namespace || st.Version != revision || st.Info.Status != "deployed" {
		t.Errorf("helm status: %s/%s revision %d %q, want %s/%s revision %d deployed", st.Namespace, st.Name, st.Version, st.Info.Status, r.namespace, r.name, revision)
	}
	out := r.h.ok(t, "status", r.name, "-n", r.namespace)
	for _, want := range []string{"NAME: " + r.name + "\n", "NAMESPACE: " + r.namespace + "\n", "STATUS: deployed\n", "REVISION: " + strconv.Itoa(revision) + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm status printed no %q:\n%s", want, out)
		}
	}
}

// checkGone checks that uninstall deleted the chart's objects and helm's
// release Secrets.
func (r helmRelease) checkGone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, get := range []struct {
		what string
		get  func() error
	}{
		{"Deployment", func() error {
			_, err := r.cs.AppsV1().Deployments(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
			return err
		}},
		{"Service", func() error {
			_, err := r.cs.CoreV1().Services(r.namespace).Get(ctx, r.name, metav1.GetOptions{})
			return err
		}},
		{"ConfigMap", func() error {
			_, err := r.cs.CoreV1().ConfigMaps(r.namespace).Get(ctx, r.name+"-config", metav1.GetOptions{})
			return err
		}},
		{"Secret", func() error {
			_, err := r.cs.CoreV1().Secrets(r.namespace).Get(ctx, r.name+"-secret", metav1.GetOptions{})
			return err
		}},
	} {
		if err := get.get(); !apierrors.IsNotFound(err) {
			t.Errorf("%s after uninstall: %v, want NotFound", get.what, err)
		}
	}
	list, err := r.cs.CoreV1().Secrets(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + r.name})
	if err != nil {
		t.Fatalf("cannot list helm's release Secrets: %v", err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d release Secrets left after uninstall", len(list.Items))
	}
	// The namespace helm created stays, as with kube-apiserver.
	if _, err := r.cs.CoreV1().Namespaces().Get(ctx, r.namespace, metav1.GetOptions{}); err != nil {
		t.Errorf("namespace %s after uninstall: %v", r.namespace, err)
	}
}

// helm runs the helm under test against one kubeconfig, with its own
// configuration, cache and data directories.
type helm struct {
	bin, kubeconfig, home string
}

func (h *helm) run(a ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), helmTimeout)
	defer cancel()
	args := append([]string{"--kubeconfig", h.kubeconfig}, a...)
	cmd := exec.CommandContext(ctx, h.bin, args...)
	// Only the flags say where the cluster is; helm's own state stays in
	// the test's directories.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HELM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(h.home, "data"),
	)
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("no exit within %s: %w", helmTimeout, err)
	}
	return result{args: a, stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// ok runs helm, expects exit status 0 and nothing on stderr, and returns
// stdout.
func (h *helm) ok(t *testing.T, a ...string) string {
	t.Helper()
	r := h.run(a...)
	if r.err != nil {
		t.Fatalf("helm %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(a, " "), r.err, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("helm %s: unexpected stderr: %q", strings.Join(a, " "), r.stderr)
	}
	return r.stdout
}

// json runs helm with -o json and decodes stdout into v.
func (h *helm) json(t *testing.T, v any, a ...string) {
	t.Helper()
	out := h.ok(t, append(a, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("helm %s -o json: cannot decode %T: %v\n%s", strings.Join(a, " "), v, err, out)
	}
}

// helmBin is the helm under test: HELM_BIN, or one built from cmd/helm on
// first use (a cold build takes minutes, so only the tests that drive helm
// pay for it).
var helmBin struct {
	once sync.Once
	path string
	err  error
}

func helmBinary(t *testing.T) string {
	t.Helper()
	helmBin.once.Do(func() {
		if helmBin.path = os.Getenv("HELM_BIN"); helmBin.path != "" {
			return
		}
		root, err := moduleRoot()
		if err != nil {
			helmBin.err = err
			return
		}
		helmBin.path = filepath.Join(binDir, "helm")
		// cmd/helm is its own module; the command is the one of
		// cmd/helm/README.md.
		helmBin.err = goBuild(filepath.Join(root, "cmd", "helm"), []string{"CGO_ENABLED=0"},
			"-trimpath", "-ldflags", helmLDFlags, "-o", helmBin.path, "helm.sh/helm/v4/cmd/helm")
	})
	if helmBin.err != nil {
		t.Fatalf("cannot build helm: %v", helmBin.err)
	}
	return helmBin.path
}

// helmLDFlags are the -X flags of cmd/helm/README.md: helm's version.
const helmLDFlags = "-s -w" +
	" -X helm.sh/helm/v4/internal/version.version=v4.3.1" +
	" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
