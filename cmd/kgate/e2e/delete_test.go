package e2e

import "testing"

func testDelete(t *testing.T, e *env) {
	e.expectOutput(t, "configmap \"web-config\" deleted from e2e namespace\n", "delete", "configmap", cmName, "-n", ns)
	r := e.k.fails(t, "get", "configmap", cmName, "-n", ns)
	if want := "Error from server (NotFound): configmaps \"web-config\" not found\n"; r.stderr != want {
		t.Errorf("get of a deleted configmap: stderr %q, want %q", r.stderr, want)
	}

	// The ConfigMap of the manifest is gone already: kubectl deletes the
	// rest and reports that one.
	r = e.k.fails(t, "delete", "-f", e.manifest)
	const deleted = "deployment.apps \"web\" deleted from e2e namespace\nservice \"web\" deleted from e2e namespace\nsecret \"web-secret\" deleted from e2e namespace\n"
	if r.stdout != deleted {
		t.Errorf("delete -f: stdout\n%s\nwant\n%s", r.stdout, deleted)
	}
	if want := "Error from server (NotFound): error when deleting \"" + e.manifest + "\": configmaps \"web-config\" not found\n"; r.stderr != want {
		t.Errorf("delete -f: stderr %q, want %q", r.stderr, want)
	}
	for _, c := range []struct{ resource, name, want string }{
		{"deployment", deployName, `deployments.apps "web" not found`},
		{"service", svcName, `services "web" not found`},
		{"secret", secretName, `secrets "web-secret" not found`},
	} {
		r := e.k.fails(t, "get", c.resource, c.name, "-n", ns)
		if want := "Error from server (NotFound): " + c.want + "\n"; r.stderr != want {
			t.Errorf("get %s %s: stderr %q, want %q", c.resource, c.name, r.stderr, want)
		}
	}
	r = e.k.run("get", "deploy,svc,cm,secret", "-n", ns)
	if r.err != nil || r.stdout != "" || r.stderr != "No resources found in e2e namespace.\n" {
		t.Errorf("get after delete: %s", r)
	}
	if r := e.k.run("get", "deployment", deployName, "-n", ns, "--ignore-not-found"); r.err != nil || r.stdout != "" || r.stderr != "" {
		t.Errorf("get --ignore-not-found: %s", r)
	}
}
