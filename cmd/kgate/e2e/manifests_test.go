package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestManifests checks the kustomize base in deploy/kubernetes (the Helm
// chart rendered by make manifests) against a real API (kgate's own):
// every object decodes, validates with field validation Strict and would
// be created (server-side dry run).
func TestManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the kgate binary; skipped under -short")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "deploy", "kubernetes")
	if _, err := os.Stat(filepath.Join(base, "kustomization.yaml")); err != nil {
		t.Fatalf("no kustomize base: %v", err)
	}
	s := startServer(t, t.TempDir())
	k := &kubectl{kubeconfig: s.kubeconfig, cacheDir: filepath.Join(t.TempDir(), "cache")}
	k.ok(t, "apply", "-f", filepath.Join(base, "namespace.yaml")) // the others live in it
	k.ok(t, "apply", "--dry-run=server", "--validate=strict", "-k", base)
}
