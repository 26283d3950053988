package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kgate/kgate/storage/storagetest"
)

const (
	crdNS   = "e2e-crd"
	crdName = "gizmos.e2e.kgate.io"
)

// gizmoCRD: e2e.kgate.io Gizmos, namespaced, short name gz; v1 (storage)
// and v1beta1 served; status and scale subresources (spec.replicas,
// status.replicas, status.selector); printer columns Replicas, Color and
// Age; spec.color defaults to blue; a CEL rule caps spec.replicas at 20.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.e2e.kgate.io
spec:
  group: e2e.kgate.io
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList, shortNames: [gz]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: &sub
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns: &cols
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema: &schema
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.replicas <= 20", message: "replicas must be at most 20"}
            properties:
              replicas: {type: integer, minimum: 0}
              color: {type: string, default: blue}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
  - name: v1beta1
    served: true
    storage: false
    subresources: *sub
    additionalPrinterColumns: *cols
    schema: *schema
`

// gizmo is a v1 Gizmo of crdNS with spec given as YAML flow mapping
// content.
func gizmo(name, spec string) string {
	return "apiVersion: e2e.kgate.io/v1\nkind: Gizmo\nmetadata:\n  name: " + name + "\n  namespace: " + crdNS + "\nspec: {" + spec + "}\n"
}

// TestCustomResources drives custom resources with kubectl as a user of
// kube-apiserver would: apply a CRD, wait for Established, create
// objects (defaulted), get them as a table (printer columns), watch a
// change, scale them, patch their status, server-side apply, see a CEL
// and a schema violation refused with upstream's 422, read them through
// the other version, then delete the CRD and see its objects and
// endpoints go.
func TestCustomResources(t *testing.T) {
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
	get := func(t *testing.T, name string, a ...string) *unstructured.Unstructured {
		t.Helper()
		// Numbers decode as int64, as unstructured's accessors read them.
		u := &unstructured.Unstructured{}
		out := k.ok(t, append([]string{"get", "gizmo", name, "-n", crdNS, "-o", "json"}, a...)...)
		if err := u.UnmarshalJSON([]byte(out)); err != nil {
			t.Fatalf("cannot decode gizmo %s: %v\n%s", name, err, out)
		}
		return u
	}
	k.ok(t, "create", "namespace", crdNS)
	crdFile := file("crd.yaml", gizmoCRD)
	// established waits for the CRD's Established condition, then for
	// its objects to be served: within seconds, as the tier promises
	// (the cache node of their new range becomes ready meanwhile).
	established := func(t *testing.T) {
		t.Helper()
		k.ok(t, "wait", "--for=condition=Established", "crd/"+crdName, "--timeout=30s")
		storagetest.Eventually(t, 15*time.Second, "gizmos served", func() error {
			if r := k.run("get", "--raw", "/apis/e2e.kgate.io/v1/namespaces/"+crdNS+"/gizmos"); r.err != nil {
				return fmt.Errorf("list: %v %s", r.err, r.stderr)
			}
			return nil
		})
	}

	t.Run("apply the CRD", func(t *testing.T) {
		if out := k.ok(t, "apply", "-f", crdFile); out != "customresourcedefinition.apiextensions.k8s.io/"+crdName+" created\n" {
			t.Errorf("apply printed %q", out)
		}
		established(t)
	})
	t.Run("create", func(t *testing.T) {
		if out := k.ok(t, "apply", "-f", file("a.yaml", gizmo("a", "replicas: 2"))); out != "gizmo.e2e.kgate.io/a created\n" {
			t.Errorf("apply printed %q", out)
		}
		a := get(t, "a")
		if c, _, _ := unstructured.NestedString(a.Object, "spec", "color"); c != "blue" {
			t.Errorf("spec.color %q, want the default blue", c)
		}
		if a.GetGeneration() != 1 {
			t.Errorf("generation %d, want 1", a.GetGeneration())
		}
	})
	t.Run("defaults on read", func(t *testing.T) {
		// A default added to the storage version's schema: objects
		// stored before are read with it, as upstream's storage decoder
		// defaults them.
		k.ok(t, "patch", "crd", crdName, "--type=json", "-p",
			`[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/shape","value":{"type":"string","default":"round"}}]`)
		storagetest.Eventually(t, 15*time.Second, "gizmo a read with the new default", func() error {
			r := k.run("get", "gizmo", "a", "-n", crdNS, "-o", "jsonpath={.spec.shape}")
			if r.err != nil || r.stdout != "round" {
				return fmt.Errorf("spec.shape %q: %v %s", r.stdout, r.err, r.stderr)
			}
			return nil
		})
		if out := k.ok(t, "get", "gizmos", "-n", crdNS, "-o", "jsonpath={.items[*].spec.shape}"); out != "round" {
			t.Errorf("list: spec.shape %q, want round", out)
		}
	})
	t.Run("get", func(t *testing.T) {
		tb := parseTable(t, k.ok(t, "get", "gizmos", "-n", crdNS))
		tb.checkHeader(t, "NAME", "REPLICAS", "COLOR", "AGE")
		checkRow(t, tb.row(t, "NAME", "a"), map[string]string{"REPLICAS": "2", "COLOR": "blue"})
		if out := k.ok(t, "get", "gz", "-n", crdNS, "-o", "name"); out != "gizmo.e2e.kgate.io/a\n" {
			t.Errorf("get gz -o name printed %q", out)
		}
	})
	t.Run("watch", func(t *testing.T) {
		w := k.start(t, true, "get", "gizmos", "-n", crdNS, "--watch", "--output-watch-events", "-o", "json")
		next := func(typ string) *unstructured.Unstructured {
			t.Helper()
			var ev watchEvent
			if raw := w.next(t, eventTimeout, typ); json.Unmarshal([]byte(raw), &ev) != nil {
				t.Fatalf("waiting for %s: cannot decode %q", typ, raw)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(ev.Object); err != nil {
				t.Fatal(err)
			}
			if ev.Type != typ || u.GetKind() != "Gizmo" || u.GetName() != "a" {
				t.Fatalf("got %s %s %s, want %s Gizmo a", ev.Type, u.GetKind(), u.GetName(), typ)
			}
			return u
		}
		next("ADDED")
		k.ok(t, "label", "gizmo", "a", "-n", crdNS, "watched=yes")
		if got := next("MODIFIED"); got.GetLabels()["watched"] != "yes" {
			t.Errorf("MODIFIED labels %v", got.GetLabels())
		}
	})
	t.Run("scale", func(t *testing.T) {
		if out := k.ok(t, "scale", "gizmo", "a", "-n", crdNS, "--replicas=5"); out != "gizmo.e2e.kgate.io/a scaled\n" {
			t.Errorf("scale printed %q", out)
		}
		a := get(t, "a", "--show-managed-fields")
		if n, _, _ := unstructured.NestedInt64(a.Object, "spec", "replicas"); n != 5 || a.GetGeneration() != 2 {
			t.Errorf("after scale: spec.replicas %d generation %d, want 5 and 2", n, a.GetGeneration())
		}
		// kubectl scale's entry, through the scale subresource, owns
		// spec.replicas, taken from the client-side apply's.
		if !owns(a.GetManagedFields(), "kubectl Update scale", "f:spec/f:replicas") || owns(a.GetManagedFields(), "kubectl-client-side-apply", "f:spec/f:replicas") {
			t.Errorf("after kubectl scale, the scale's entry should own spec.replicas alone: %+v", a.GetManagedFields())
		}
		var s autoscalingv1.Scale
		k.json(t, &s, "get", "gizmo", "a", "-n", crdNS, "--subresource=scale")
		if s.APIVersion != "autoscaling/v1" || s.Kind != "Scale" || s.Name != "a" || s.Spec.Replicas != 5 {
			t.Errorf("scale subresource %s %s %s replicas %d", s.APIVersion, s.Kind, s.Name, s.Spec.Replicas)
		}
		// kubectl scale refuses a negative count itself; a patch of the
		// scale reaches the custom resource's validation.
		r := k.fails(t, "patch", "gizmo", "a", "-n", crdNS, "--subresource=scale", "--type=merge", "-p", `{"spec":{"replicas":-1}}`)
		for _, want := range []string{`The Gizmo "a" is invalid: `,
			`* spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0`,
			`* .spec.replicas: Invalid value: -1: should be a non-negative integer`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("scale patch to -1: stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})
	t.Run("status subresource", func(t *testing.T) {
		k.ok(t, "patch", "gizmo", "a", "-n", crdNS, "--subresource=status", "--type=merge",
			"-p", `{"status":{"replicas":5,"selector":"app=a"},"spec":{"replicas":9}}`)
		a := get(t, "a")
		if n, _, _ := unstructured.NestedInt64(a.Object, "status", "replicas"); n != 5 {
			t.Errorf("status.replicas %d, want 5", n)
		}
		if n, _, _ := unstructured.NestedInt64(a.Object, "spec", "replicas"); n != 5 || a.GetGeneration() != 2 {
			t.Errorf("the status patch changed spec: spec.replicas %d generation %d", n, a.GetGeneration())
		}
		var s autoscalingv1.Scale
		k.json(t, &s, "get", "gizmo", "a", "-n", crdNS, "--subresource=scale")
		if s.Status.Replicas != 5 || s.Status.Selector != "app=a" {
			t.Errorf("scale status %+v, want 5 replicas and selector app=a", s.Status)
		}
	})
	t.Run("server-side apply", func(t *testing.T) {
		p := file("b.yaml", gizmo("b", "replicas: 1, color: red"))
		if out := k.ok(t, "apply", "--server-side", "-f", p); out != "gizmo.e2e.kgate.io/b serverside-applied\n" {
			t.Errorf("apply --server-side printed %q", out)
		}
		k.ok(t, "apply", "--server-side", "-f", file("b2.yaml", gizmo("b", "replicas: 3")))
		b := get(t, "b", "--show-managed-fields")
		n, _, _ := unstructured.NestedInt64(b.Object, "spec", "replicas")
		c, _, _ := unstructured.NestedString(b.Object, "spec", "color")
		// The color the manager no longer applies goes, and the default
		// comes back.
		if n != 3 || c != "blue" {
			t.Errorf("after re-apply: replicas %d color %q, want 3 and blue", n, c)
		}
		if mf := b.GetManagedFields(); len(mf) != 1 || mf[0].Manager != "kubectl" || mf[0].Operation != "Apply" {
			t.Errorf("managedFields %+v, want one kubectl Apply", mf)
		}
	})
	t.Run("CEL violation", func(t *testing.T) {
		r := k.fails(t, "apply", "-f", file("cel.yaml", gizmo("cel", "replicas: 25")), "-v=6")
		for _, want := range []string{"422 Unprocessable Entity", `The Gizmo "cel" is invalid: spec: Invalid value: replicas must be at most 20`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})
	t.Run("schema violation", func(t *testing.T) {
		r := k.fails(t, "apply", "-f", file("schema.yaml", gizmo("schema", "replicas: 1, color: 7")), "-v=6")
		// The CEL rules are not run on an object the schema refuses:
		// upstream says so in a second cause.
		for _, want := range []string{"422 Unprocessable Entity", `The Gizmo "schema" is invalid: `,
			`* spec.color: Invalid value: "integer": spec.color in body must be of type string: "integer"`,
			`* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		if r := k.run("get", "gizmo", "schema", "-n", crdNS); r.err == nil {
			t.Error("the invalid Gizmo was stored")
		}
	})
	t.Run("other version", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		k.json(t, &u.Object, "get", "gizmos.v1beta1.e2e.kgate.io", "a", "-n", crdNS)
		shape, _, _ := unstructured.NestedString(u.Object, "spec", "shape")
		if u.GetAPIVersion() != "e2e.kgate.io/v1beta1" || u.GetName() != "a" || shape != "round" {
			t.Errorf("v1beta1 read: %s %s spec.shape %q (want the storage version's default round)", u.GetAPIVersion(), u.GetName(), shape)
		}
		tb := parseTable(t, k.ok(t, "get", "gizmos.v1beta1.e2e.kgate.io", "-n", crdNS))
		checkRow(t, tb.row(t, "NAME", "b"), map[string]string{"REPLICAS": "3", "COLOR": "blue"})
	})
	t.Run("delete the CRD", func(t *testing.T) {
		// kubectl waits for the CRD to go: its finalizer removes the
		// Gizmos first.
		if out := k.ok(t, "delete", "-f", crdFile); out != "customresourcedefinition.apiextensions.k8s.io \""+crdName+"\" deleted\n" {
			t.Errorf("delete printed %q", out)
		}
		// A kubectl without the discovery cached before.
		fresh := &kubectl{kubeconfig: srv.kubeconfig, cacheDir: filepath.Join(root, "kubectl-cache-2")}
		r := fresh.run("get", "gizmos", "-n", crdNS)
		if r.err == nil || !strings.Contains(r.stderr, `the server doesn't have a resource type "gizmos"`) {
			t.Errorf("get gizmos after the CRD went: %s", r)
		}
		if r := k.run("get", "--raw", "/apis/e2e.kgate.io/v1/namespaces/"+crdNS+"/gizmos"); r.err == nil || !strings.Contains(r.stderr, "NotFound") {
			t.Errorf("GET of the gone endpoint: %s", r)
		}
		// The CRD again: none of the old objects is left.
		k.ok(t, "apply", "-f", crdFile)
		established(t)
		if r := k.run("get", "gizmos", "-n", crdNS); r.err != nil || r.stdout != "" || !strings.Contains(r.stderr, "No resources found") {
			t.Errorf("get gizmos of the new CRD: %s", r)
		}
	})
}
