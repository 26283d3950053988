package e2e

import (
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func (e *env) configMap(t *testing.T) corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	e.k.json(t, &cm, "get", "configmap", cmName, "-n", ns)
	return cm
}

func (e *env) deployment(t *testing.T) appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	e.k.json(t, &d, "get", "deployment", deployName, "-n", ns)
	return d
}

// expectOutput runs kubectl, expecting success and exactly want on stdout.
func (e *env) expectOutput(t *testing.T, want string, args ...string) {
	t.Helper()
	if out := e.k.ok(t, args...); out != want {
		t.Errorf("kubectl %q printed %q, want %q", args, out, want)
	}
}

func testLabelAnnotate(t *testing.T, e *env) {
	cm0 := e.configMap(t)
	e.expectOutput(t, "configmap/web-config labeled\n", "label", "configmap", cmName, "-n", ns, "tier=backend")
	e.expectOutput(t, "configmap/web-config annotated\n", "annotate", "configmap", cmName, "-n", ns, "owner=team-a")
	cm := e.configMap(t)
	if !maps.Equal(cm.Labels, map[string]string{"app": "web", "tier": "backend"}) || cm.Annotations["owner"] != "team-a" {
		t.Errorf("after label and annotate: labels %v, annotations %v", cm.Labels, cm.Annotations)
	}
	if cm.ResourceVersion == cm0.ResourceVersion || cm.UID != cm0.UID {
		t.Errorf("uid/resourceVersion %s/%s, was %s/%s", cm.UID, cm.ResourceVersion, cm0.UID, cm0.ResourceVersion)
	}

	r := e.k.fails(t, "label", "configmap", cmName, "-n", ns, "tier=frontend")
	if want := "error: 'tier' already has a value (backend), and --overwrite is false\n"; r.stderr != want {
		t.Errorf("label without --overwrite: stderr %q, want %q", r.stderr, want)
	}
	e.expectOutput(t, "configmap/web-config labeled\n", "label", "configmap", cmName, "-n", ns, "tier=frontend", "--overwrite")
	if cm := e.configMap(t); !maps.Equal(cm.Labels, map[string]string{"app": "web", "tier": "frontend"}) {
		t.Errorf("after label --overwrite: labels %v", cm.Labels)
	}
	e.expectOutput(t, "configmap/web-config unlabeled\n", "label", "configmap", cmName, "-n", ns, "tier-")
	e.expectOutput(t, "configmap/web-config annotated\n", "annotate", "configmap", cmName, "-n", ns, "owner-")
	cm = e.configMap(t)
	if !maps.Equal(cm.Labels, map[string]string{"app": "web"}) {
		t.Errorf("after removing tier: labels %v, want app=web only", cm.Labels)
	}
	if _, ok := cm.Annotations["owner"]; ok {
		t.Errorf("after removing owner: annotations %v", cm.Annotations)
	}

	// Several objects by selector; metadata changes leave generation alone.
	d0 := e.deployment(t)
	e.expectOutput(t, "deployment.apps/web labeled\nservice/web labeled\n", "label", "deployment,service", "-n", ns, "-l", "app=web", "team=blue")
	d := e.deployment(t)
	if d.Labels["team"] != "blue" || d.Generation != d0.Generation {
		t.Errorf("after labelling the deployment: labels %v, generation %d (was %d)", d.Labels, d.Generation, d0.Generation)
	}
	e.expectOutput(t, "deployment.apps/web unlabeled\nservice/web unlabeled\n", "label", "deployment,service", "-n", ns, "-l", "app=web", "team-")
}

func testPatch(t *testing.T, e *env) {
	gen := e.deployment(t).Generation
	check := func(t *testing.T, image string, ports int, generation int64) {
		t.Helper()
		d := e.deployment(t)
		c := d.Spec.Template.Spec.Containers
		if len(c) != 1 || c[0].Name != "web" || c[0].Image != image || len(c[0].Ports) != ports {
			t.Errorf("containers %+v, want one named web with image %s and %d ports", c, image, ports)
		}
		if d.Generation != generation {
			t.Errorf("generation %d, want %d", d.Generation, generation)
		}
	}
	const patched = "deployment.apps/web patched\n"
	t.Run("strategic", func(t *testing.T) {
		// Containers merge by name: the ports stay.
		e.expectOutput(t, patched, "patch", "deployment", deployName, "-n", ns,
			"-p", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.26"}]}}}}`)
		check(t, "nginx:1.26", 1, gen+1)
	})
	t.Run("json", func(t *testing.T) {
		e.expectOutput(t, patched, "patch", "deployment", deployName, "-n", ns, "--type=json",
			"-p", `[{"op":"test","path":"/spec/template/spec/containers/0/name","value":"web"},`+
				`{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}]`)
		check(t, "nginx:1.27", 1, gen+2)
	})
	t.Run("merge", func(t *testing.T) {
		// A JSON merge patch replaces the list: the ports go.
		e.expectOutput(t, patched, "patch", "deployment", deployName, "-n", ns, "--type=merge",
			"-p", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}`)
		check(t, "nginx:1.28", 0, gen+3)
	})
	t.Run("no change", func(t *testing.T) {
		rv := e.deployment(t).ResourceVersion
		e.expectOutput(t, "deployment.apps/web patched (no change)\n", "patch", "deployment", deployName, "-n", ns, "--type=merge",
			"-p", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}`)
		check(t, "nginx:1.28", 0, gen+3)
		if got := e.deployment(t).ResourceVersion; got != rv {
			t.Errorf("resourceVersion %s after a no-op patch, was %s", got, rv)
		}
	})
}

func testReplace(t *testing.T, e *env) {
	d0 := e.deployment(t)
	edit := func(t *testing.T, name string, replicas int) string {
		t.Helper()
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(e.k.ok(t, "get", "deployment", deployName, "-n", ns, "-o", "yaml")), &obj); err != nil {
			t.Fatal(err)
		}
		obj["spec"].(map[string]any)["replicas"] = replicas
		obj["metadata"].(map[string]any)["labels"].(map[string]any)["stage"] = name
		out, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return e.writeFile(t, name+".yaml", string(out))
	}
	// Both edits start from the same object: once one is stored, the
	// other's resourceVersion is stale.
	current := edit(t, "replaced", 3)
	stale := edit(t, "stale", 4)
	t.Run("from get -o yaml", func(t *testing.T) {
		e.expectOutput(t, "deployment.apps/web replaced\n", "replace", "-f", current)
		d := e.deployment(t)
		if *d.Spec.Replicas != 3 || d.Labels["stage"] != "replaced" {
			t.Errorf("after replace: replicas %d, labels %v", *d.Spec.Replicas, d.Labels)
		}
		if d.UID != d0.UID || d.ResourceVersion == d0.ResourceVersion || d.Generation != d0.Generation+1 {
			t.Errorf("after replace: uid/resourceVersion/generation %s/%s/%d, was %s/%s/%d",
				d.UID, d.ResourceVersion, d.Generation, d0.UID, d0.ResourceVersion, d0.Generation)
		}
	})
	t.Run("stale resourceVersion", func(t *testing.T) {
		r := e.k.fails(t, "replace", "-f", stale)
		want := "Error from server (Conflict): error when replacing \"" + stale + "\": Operation cannot be fulfilled on deployments.apps \"web\": " +
			"the object has been modified; please apply your changes to the latest version and try again\n"
		if r.stderr != want {
			t.Errorf("replace with a stale resourceVersion: stderr\n%s\nwant\n%s", r.stderr, want)
		}
		if d := e.deployment(t); *d.Spec.Replicas != 3 || d.Labels["stage"] != "replaced" {
			t.Errorf("the stale replace changed the object: replicas %d, labels %v", *d.Spec.Replicas, d.Labels)
		}
	})
}

func testScale(t *testing.T, e *env) {
	d0 := e.deployment(t)
	e.expectOutput(t, "deployment.apps/web scaled\n", "scale", "deployment", deployName, "-n", ns, "--replicas=5")
	if out := e.k.ok(t, "get", "deployment", deployName, "-n", ns, "-o", "jsonpath={.spec.replicas}"); out != "5" {
		t.Errorf("spec.replicas after scale: %q, want 5", out)
	}
	if d := e.deployment(t); d.Generation != d0.Generation+1 {
		t.Errorf("generation %d after scale, was %d", d.Generation, d0.Generation)
	}
	var s autoscalingv1.Scale
	e.k.json(t, &s, "get", "deployment", deployName, "-n", ns, "--subresource=scale")
	if s.APIVersion != "autoscaling/v1" || s.Kind != "Scale" || s.Name != deployName || s.Spec.Replicas != 5 || s.Status.Selector != "app=web" {
		t.Errorf("scale subresource: %s %s %s replicas %d selector %q", s.APIVersion, s.Kind, s.Name, s.Spec.Replicas, s.Status.Selector)
	}
}
