package e2e

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// testRestart stops kgate dev and starts it again on the same data
// directory: the objects are there as they were, and the kubeconfig of
// the first run still works.
func testRestart(t *testing.T, e *env) {
	before := metas(t, e.k)
	var ns0 corev1.Namespace
	e.k.json(t, &ns0, "get", "namespace", ns)
	kubeconfig, err := os.ReadFile(e.srv.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// kubectl reads this copy: what a user kept from the first run.
	saved := &kubectl{kubeconfig: e.writeFile(t, "kubeconfig-first-run", string(kubeconfig)), cacheDir: e.k.cacheDir}

	if err := e.srv.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := e.srv.start(); err != nil {
		t.Fatalf("cannot start kgate dev again on the same data directory: %v", err)
	}
	if now, err := os.ReadFile(e.srv.kubeconfig); err != nil || !bytes.Equal(now, kubeconfig) {
		t.Errorf("the kubeconfig changed across the restart (err %v)", err)
	}

	after := metas(t, saved)
	var last uint64
	for k, b := range before {
		a := after[k]
		if a.UID != b.UID || a.ResourceVersion != b.ResourceVersion || !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			t.Errorf("%s: uid/resourceVersion/created %s/%s/%v after the restart, was %s/%s/%v",
				k, a.UID, a.ResourceVersion, a.CreationTimestamp, b.UID, b.ResourceVersion, b.CreationTimestamp)
		}
		rv, _ := strconv.ParseUint(b.ResourceVersion, 10, 64)
		last = max(last, rv)
	}
	var ns1 corev1.Namespace
	saved.json(t, &ns1, "get", "namespace", ns)
	if ns1.UID != ns0.UID || ns1.ResourceVersion != ns0.ResourceVersion {
		t.Errorf("namespace uid/resourceVersion %s/%s after the restart, was %s/%s", ns1.UID, ns1.ResourceVersion, ns0.UID, ns0.ResourceVersion)
	}
	if out := saved.ok(t, "get", "deployment", deployName, "-n", ns, "-o", "jsonpath={.spec.replicas}"); out != "5" {
		t.Errorf("spec.replicas after the restart: %q, want 5", out)
	}

	// Writes go on from where the revisions were.
	if out := saved.ok(t, "label", "configmap", cmName, "-n", ns, "restarted=yes"); out != "configmap/web-config labeled\n" {
		t.Errorf("label after the restart printed %q", out)
	}
	var cm corev1.ConfigMap
	saved.json(t, &cm, "get", "configmap", cmName, "-n", ns)
	if rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64); err != nil || rv <= last || cm.Labels["restarted"] != "yes" {
		t.Errorf("after a write following the restart: resourceVersion %s (want > %d), labels %v", cm.ResourceVersion, last, cm.Labels)
	}
}
