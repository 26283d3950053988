package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const ssaNS = "e2e-ssa"

// ssaConfigMap is the ConfigMap "ssa" with data given as key=value pairs.
func ssaConfigMap(data ...string) string {
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: " + ssaNS + "\ndata:\n"
	for _, kv := range data {
		k, v, _ := strings.Cut(kv, "=")
		s += "  " + k + ": " + v + "\n"
	}
	return s
}

// managers returns "manager operation" of each managedFields entry,
// sorted.
func managers(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Manager+" "+string(e.Operation))
	}
	slices.Sort(out)
	return out
}

// owns reports whether an entry of manager owns the field path (a
// fieldsV1 key path such as f:data/f:color); manager is "name" (any
// entry of that manager) or "name operation" or "name operation
// subresource".
func owns(entries []metav1.ManagedFieldsEntry, manager, path string) bool {
	for _, e := range entries {
		id := strings.Fields(manager)
		if e.Manager != id[0] || e.FieldsV1 == nil ||
			(len(id) > 1 && string(e.Operation) != id[1]) || (len(id) > 2 && e.Subresource != id[2]) {
			continue
		}
		raw := string(e.FieldsV1.Raw)
		all := true
		for _, p := range strings.Split(path, "/") {
			if !strings.Contains(raw, `"`+p+`"`) {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

// TestServerSideApply drives kgate dev with kubectl's server-side apply:
// create and re-apply, a second manager's conflict (409 naming the field,
// nothing written), --force-conflicts, managedFields shown with
// --show-managed-fields, the upgrade from client-side apply, and the
// managers of kubectl's own updates (label, scale).
func TestServerSideApply(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary and drives it with kubectl; skipped under -short")
	}
	root := t.TempDir()
	srv := startServer(t, filepath.Join(root, "data"))
	k := &kubectl{kubeconfig: srv.kubeconfig, cacheDir: filepath.Join(root, "kubectl-cache")}
	file := func(name, content string) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cm := func(t *testing.T) corev1.ConfigMap {
		t.Helper()
		var c corev1.ConfigMap
		k.json(t, &c, "get", "configmap", "ssa", "-n", ssaNS, "--show-managed-fields")
		return c
	}
	k.ok(t, "create", "namespace", ssaNS)

	t.Run("create", func(t *testing.T) {
		out := k.ok(t, "apply", "--server-side", "-f", file("cm1.yaml", ssaConfigMap("color=blue", "size=large")))
		if out != "configmap/ssa serverside-applied\n" {
			t.Errorf("apply --server-side printed %q", out)
		}
		c := cm(t)
		if c.Data["color"] != "blue" || c.Data["size"] != "large" {
			t.Errorf("data %v", c.Data)
		}
		if got := managers(c.ManagedFields); !slices.Equal(got, []string{"kubectl Apply"}) {
			t.Errorf("managers %v, want kubectl Apply", got)
		}
		if !owns(c.ManagedFields, "kubectl", "f:data/f:color") || !owns(c.ManagedFields, "kubectl", "f:data/f:size") {
			t.Errorf("kubectl does not own data.color and data.size: %+v", c.ManagedFields)
		}
	})
	t.Run("re-apply", func(t *testing.T) {
		before := cm(t)
		out := k.ok(t, "apply", "--server-side", "-f", file("cm2.yaml", ssaConfigMap("color=green", "mode=fast")))
		if out != "configmap/ssa serverside-applied\n" {
			t.Errorf("apply --server-side printed %q", out)
		}
		c := cm(t)
		if c.Data["color"] != "green" || c.Data["mode"] != "fast" || c.Data["size"] != "" || c.UID != before.UID {
			t.Errorf("after re-apply without size: data %v, uid %s (was %s)", c.Data, c.UID, before.UID)
		}
		if got := managers(c.ManagedFields); !slices.Equal(got, []string{"kubectl Apply"}) {
			t.Errorf("managers %v, want kubectl Apply", got)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		before := cm(t)
		p := file("cm-other.yaml", ssaConfigMap("color=red"))
		r := k.fails(t, "apply", "--server-side", "--field-manager", "other", "-f", p)
		if !strings.Contains(r.stderr, `Apply failed with 1 conflict: conflict with "kubectl": .data.color`) {
			t.Errorf("conflicting apply: %s", r)
		}
		// kubectl -v=6 shows the answer's code.
		r = k.fails(t, "apply", "--server-side", "--field-manager", "other", "-f", p, "-v=6")
		if !strings.Contains(r.stderr, "409 Conflict") {
			t.Errorf("conflicting apply did not answer 409: %s", r)
		}
		if c := cm(t); c.ResourceVersion != before.ResourceVersion || c.Data["color"] != "green" {
			t.Errorf("a conflicting apply wrote: resourceVersion %s (was %s), data %v", c.ResourceVersion, before.ResourceVersion, c.Data)
		}
	})
	t.Run("force-conflicts", func(t *testing.T) {
		out := k.ok(t, "apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", file("cm-force.yaml", ssaConfigMap("color=red")))
		if out != "configmap/ssa serverside-applied\n" {
			t.Errorf("apply --force-conflicts printed %q", out)
		}
		c := cm(t)
		if c.Data["color"] != "red" {
			t.Errorf("data %v after force", c.Data)
		}
		if !owns(c.ManagedFields, "other", "f:data/f:color") || owns(c.ManagedFields, "kubectl", "f:data/f:color") || !owns(c.ManagedFields, "kubectl", "f:data/f:mode") {
			t.Errorf("after force, other should own data.color alone and kubectl data.mode: %+v", c.ManagedFields)
		}
	})
	t.Run("show-managed-fields", func(t *testing.T) {
		// kubectl label is an update by "kubectl-label".
		k.ok(t, "label", "configmap", "ssa", "-n", ssaNS, "team=blue")
		out := k.ok(t, "get", "configmap", "ssa", "-n", ssaNS, "-o", "yaml", "--show-managed-fields")
		var c corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("get -o yaml: %v\n%s", err, out)
		}
		want := []string{"kubectl Apply", "kubectl-label Update", "other Apply"}
		if got := managers(c.ManagedFields); !slices.Equal(got, want) {
			t.Errorf("managers %v, want %v\n%s", got, want, out)
		}
		if !owns(c.ManagedFields, "kubectl-label", "f:metadata/f:labels/f:team") {
			t.Errorf("kubectl-label does not own the label:\n%s", out)
		}
		if plain := k.ok(t, "get", "configmap", "ssa", "-n", ssaNS, "-o", "yaml"); strings.Contains(plain, "managedFields") {
			t.Errorf("get -o yaml without --show-managed-fields shows them:\n%s", plain)
		}
	})
	t.Run("client-side to server-side upgrade", func(t *testing.T) {
		const name = "csa"
		manifest := func(replicas, image string, withEnv bool) string {
			s := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: csa
  namespace: ` + ssaNS + `
spec:
  replicas: ` + replicas + `
  selector:
    matchLabels: {app: csa}
  template:
    metadata:
      labels: {app: csa}
    spec:
      containers:
      - name: c
        image: ` + image + "\n"
			if withEnv {
				s += "        env:\n        - {name: MODE, value: csa}\n"
			}
			return s
		}
		dep := func(t *testing.T) appsv1.Deployment {
			t.Helper()
			var d appsv1.Deployment
			k.json(t, &d, "get", "deployment", name, "-n", ssaNS, "--show-managed-fields")
			return d
		}
		if out := k.ok(t, "apply", "-f", file("csa1.yaml", manifest("1", "nginx:1.25", true))); out != "deployment.apps/csa created\n" {
			t.Errorf("client-side apply printed %q", out)
		}
		d := dep(t)
		if d.Annotations[corev1.LastAppliedConfigAnnotation] == "" {
			t.Errorf("client-side apply left no last-applied annotation")
		}
		if got := managers(d.ManagedFields); !slices.Equal(got, []string{"kubectl-client-side-apply Update"}) {
			t.Errorf("managers after client-side apply %v", got)
		}
		// The same manifest with a new image and without the env, applied
		// server-side: no conflict with the client-side manager, and the
		// env it no longer lists is gone (kubectl owns what
		// kubectl-client-side-apply owned).
		out := k.ok(t, "apply", "--server-side", "-f", file("csa2.yaml", manifest("1", "nginx:1.26", false)))
		if out != "deployment.apps/csa serverside-applied\n" {
			t.Errorf("server-side apply printed %q", out)
		}
		d = dep(t)
		c := d.Spec.Template.Spec.Containers
		if len(c) != 1 || c[0].Image != "nginx:1.26" || len(c[0].Env) != 0 {
			t.Errorf("after the upgrade: containers %+v", c)
		}
		if got := managers(d.ManagedFields); slices.Contains(got, "kubectl-client-side-apply Update") || !slices.Contains(got, "kubectl Apply") {
			t.Errorf("managers after the upgrade %v", got)
		}
	})
	t.Run("scale", func(t *testing.T) {
		k.ok(t, "scale", "deployment", "csa", "-n", ssaNS, "--replicas", "3")
		var d appsv1.Deployment
		k.json(t, &d, "get", "deployment", "csa", "-n", ssaNS, "--show-managed-fields")
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
			t.Fatalf("replicas %v after scale", d.Spec.Replicas)
		}
		// kubectl scale updates through the scale subresource; its entry
		// moves to the Deployment as upstream's: manager kubectl,
		// subresource scale, owning spec.replicas, taken from the apply.
		if !owns(d.ManagedFields, "kubectl Update scale", "f:spec/f:replicas") || owns(d.ManagedFields, "kubectl Apply", "f:spec/f:replicas") {
			t.Errorf("after kubectl scale, the scale's entry should own spec.replicas alone: %+v", d.ManagedFields)
		}
		// Re-applying the manifest's replicas now conflicts with the scaler.
		r := k.fails(t, "apply", "--server-side", "-f", filepath.Join(root, "csa2.yaml"))
		if !strings.Contains(r.stderr, `Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas`) {
			t.Errorf("apply after scale: %s", r)
		}
	})
	t.Run("dry run writes nothing", func(t *testing.T) {
		before := cm(t)
		k.ok(t, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", file("cm-dry.yaml", ssaConfigMap("color=black")))
		if c := cm(t); c.ResourceVersion != before.ResourceVersion || c.Data["color"] != before.Data["color"] {
			t.Errorf("dry-run apply wrote: data %v", c.Data)
		}
		p := file("cm-dry-new.yaml", strings.Replace(ssaConfigMap("color=black"), "name: ssa", "name: ssa-dry", 1))
		if out := k.ok(t, "apply", "--server-side", "--dry-run=server", "-f", p); out != "configmap/ssa-dry serverside-applied (server dry run)\n" {
			t.Errorf("dry-run apply of a new object printed %q", out)
		}
		if r := k.fails(t, "get", "configmap", "ssa-dry", "-n", ssaNS); !strings.Contains(r.stderr, "NotFound") {
			t.Errorf("dry-run apply created the object: %s", r)
		}
	})
}
