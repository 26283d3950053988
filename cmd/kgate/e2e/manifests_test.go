package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestManifests checks the Kubernetes manifests in deploy/kubernetes
// against a real API (kgate's own): every object decodes, validates with
// field validation Strict and would be created (server-side dry run).
func TestManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary; skipped under -short")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found: %v", err)
	}
	sort.Strings(files)
	s := startServer(t, t.TempDir())
	k := &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(t.TempDir(), "cache")}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "00-namespace.yaml" {
			k.ok(t, "apply", "-f", f) // the others live in it
			continue
		}
		k.ok(t, "apply", "--dry-run=server", "--validate=strict", "-f", f)
	}
}
