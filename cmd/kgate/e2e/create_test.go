package e2e

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testCreateNamespace(t *testing.T, e *env) {
	if out := e.k.ok(t, "create", "namespace", ns); out != "namespace/e2e created\n" {
		t.Errorf("create namespace printed %q", out)
	}
	var n corev1.Namespace
	e.k.json(t, &n, "get", "namespace", ns)
	if n.Kind != "Namespace" || n.APIVersion != "v1" || n.Name != ns {
		t.Errorf("got %s %s %q, want v1 Namespace %q", n.APIVersion, n.Kind, n.Name, ns)
	}
	if n.UID == "" || n.ResourceVersion == "" || n.CreationTimestamp.IsZero() {
		t.Errorf("namespace without uid, resourceVersion or creationTimestamp: %+v", n.ObjectMeta)
	}
	if n.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace phase %q, want Active", n.Status.Phase)
	}
	if !slices.Equal(n.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) {
		t.Errorf("namespace finalizers %q, want [kubernetes]", n.Spec.Finalizers)
	}
	tb := parseTable(t, e.k.ok(t, "get", "namespace", ns))
	tb.checkHeader(t, "NAME", "STATUS", "AGE")
	checkRow(t, tb.row(t, "NAME", ns), map[string]string{"STATUS": "Active"})
}

func testApply(t *testing.T, e *env) {
	const created = "deployment.apps/web created\nservice/web created\nconfigmap/web-config created\nsecret/web-secret created\n"
	if out := e.k.ok(t, "apply", "-f", e.manifest); out != created {
		t.Fatalf("first apply printed\n%s\nwant\n%s", out, created)
	}
	before := metas(t, e.k)

	// kubectl reports a Secret given as stringData as "configured" on
	// every apply whatever the server (kubernetes/kubernetes#87736): its
	// last-applied stringData never matches the stored object.
	const unchanged = "deployment.apps/web unchanged\nservice/web unchanged\nconfigmap/web-config unchanged\nsecret/web-secret configured\n"
	if out := e.k.ok(t, "apply", "-f", e.manifest); out != unchanged {
		t.Errorf("second apply printed\n%s\nwant\n%s", out, unchanged)
	}
	// Nothing changed, so nothing was written: kube-apiserver skips an
	// update that leaves the stored bytes as they are (the Secret's patch
	// sets stringData to what data already holds).
	after := metas(t, e.k)
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if b, a := before[k], after[k]; a.ResourceVersion != b.ResourceVersion || a.UID != b.UID {
			t.Errorf("%s: uid/resourceVersion %s/%s after the second apply, was %s/%s", k, a.UID, a.ResourceVersion, b.UID, b.ResourceVersion)
		}
	}
}

// metas is the metadata of the four workflow objects by "Kind/name", as k
// gets them.
func metas(t *testing.T, k *kubectl) map[string]metav1.ObjectMeta {
	t.Helper()
	var list struct {
		Items []struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	k.json(t, &list, "get", "-n", ns, "deployment/"+deployName, "service/"+svcName, "configmap/"+cmName, "secret/"+secretName)
	m := make(map[string]metav1.ObjectMeta)
	for _, it := range list.Items {
		m[it.Kind+"/"+it.Metadata.Name] = it.Metadata
	}
	want := []string{"ConfigMap/web-config", "Deployment/web", "Secret/web-secret", "Service/web"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Fatalf("got objects %q, want %q", got, want)
	}
	return m
}

func testCreateErrors(t *testing.T, e *env) {
	t.Run("already exists", func(t *testing.T) {
		r := e.k.fails(t, "create", "namespace", ns)
		if want := "Error from server (AlreadyExists): namespaces \"e2e\" already exists\n"; r.stderr != want {
			t.Errorf("create namespace again: stderr %q, want %q", r.stderr, want)
		}
		r = e.k.fails(t, "create", "-f", e.manifest)
		want := ""
		for _, o := range []string{`deployments.apps "web"`, `services "web"`, `configmaps "web-config"`, `secrets "web-secret"`} {
			want += "Error from server (AlreadyExists): error when creating \"" + e.manifest + "\": " + o + " already exists\n"
		}
		if r.stdout != "" || r.stderr != want {
			t.Errorf("create -f of existing objects: stdout %q, stderr\n%s\nwant stderr\n%s", r.stdout, r.stderr, want)
		}
	})
	t.Run("invalid name", func(t *testing.T) {
		const subdomain = `metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`
		const label = `metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`
		bad := e.writeFile(t, "bad-name.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n  namespace: e2e\ndata:\n  k: v\n")
		for _, c := range []struct {
			args   []string
			prefix string // of stderr
		}{
			// kubectl prints "The <Kind> "<name>" is invalid: <causes>" only
			// for a 422 Invalid Status that carries the causes.
			{[]string{"create", "-f", bad}, `The ConfigMap "Bad_Name" is invalid: ` + subdomain},
			{[]string{"create", "configmap", "Bad_Name", "-n", ns, "--from-literal=k=v"}, `error: failed to create configmap: ConfigMap "Bad_Name" is invalid: ` + subdomain},
			{[]string{"create", "deployment", "Bad_Name", "-n", ns, "--image=nginx"}, `error: failed to create deployment: Deployment.apps "Bad_Name" is invalid: ` + subdomain},
			{[]string{"create", "namespace", "Bad_Name"}, `The Namespace "Bad_Name" is invalid: ` + label},
		} {
			r := e.k.fails(t, c.args...)
			if !strings.HasPrefix(r.stderr, c.prefix) {
				t.Errorf("kubectl %s: stderr\n%s\nwant it to start with\n%s", strings.Join(c.args, " "), r.stderr, c.prefix)
			}
		}
	})
}
