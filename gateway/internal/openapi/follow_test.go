package openapi

import (
	"bytes"
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/version"

	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestFollowsRegistry: a resource added gets its paths and a new hash and
// ETag for its group/version document; removed, they go.
func TestFollowsRegistry(t *testing.T) {
	reg, cm := storagetest.RegistryWithout(t, "configmaps")
	o, err := New(reg, version.Info{GitVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	const path = "/api/v1/namespaces/{namespace}/configmaps"
	get := func(p string) Response {
		t.Helper()
		resp, ok := o.Serve(p, "", "application/json")
		if !ok || resp.Status != http.StatusOK {
			t.Fatalf("%s: %v, %d", p, ok, resp.Status)
		}
		return resp
	}
	before := get("/openapi/v3/api/v1")
	if bytes.Contains(before.Body, []byte(path)) {
		t.Fatal("configmaps paths before Add")
	}
	index := get("/openapi/v3")
	oldHash := o.current().v3["api/v1"].hash

	if err := reg.Add(cm); err != nil {
		t.Fatal(err)
	}
	if stale := get("/openapi/v3/api/v1"); stale.ETag != before.ETag {
		t.Error("documents changed before they were rendered again")
	}
	settle(o)
	if o.Rendered() != reg.Generation() {
		t.Fatalf("rendered generation %d, registry at %d", o.Rendered(), reg.Generation())
	}
	added := get("/openapi/v3/api/v1")
	if !bytes.Contains(added.Body, []byte(path)) {
		t.Error("no configmaps paths after Add")
	}
	if added.ETag == before.ETag {
		t.Error("the v3 document's ETag did not change")
	}
	if get("/openapi/v3").ETag == index.ETag {
		t.Error("the index did not change")
	}
	// A client holding the old hash is sent to the new one.
	if resp, _ := o.Serve("/openapi/v3/api/v1", oldHash, "application/json"); resp.Status != http.StatusMovedPermanently {
		t.Errorf("stale hash: status %d, want 301", resp.Status)
	}

	if err := reg.Remove(cm.GVR()); err != nil {
		t.Fatal(err)
	}
	settle(o)
	if after := get("/openapi/v3/api/v1"); after.ETag != before.ETag || bytes.Contains(after.Body, []byte(path)) {
		t.Error("configmaps still described after Remove")
	}
	if err := o.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
}

// settle starts rendering the registry's latest generation, if needed,
// and waits for it.
func settle(o *Documents) {
	o.current()
	o.wg.Wait()
}

// TestClose: no render starts after Close.
func TestClose(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(reg, version.Info{GitVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	if err := reg.Remove(reg.Resources()[0].GVR()); err != nil {
		t.Fatal(err)
	}
	settle(o)
	if o.Rendered() != 0 {
		t.Errorf("rendered generation %d after Close, want 0", o.Rendered())
	}
}
