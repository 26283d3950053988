package openapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/storage/registry"
)

// remote is a Remote whose specs the test sets.
type remote struct {
	gen   atomic.Uint64
	specs atomic.Pointer[RemoteSpecs]
}

func (r *remote) Generation() uint64 { return r.gen.Load() }
func (r *remote) Specs() RemoteSpecs { return *r.specs.Load() }

func (r *remote) set(s RemoteSpecs) {
	r.specs.Store(&s)
	r.gen.Add(1)
}

// extensionV2 is an extension server's v2 document of one path under
// /apis/example.com/v1, using a Widget and an ObjectMeta of its own.
func extensionV2(path string) *spec.Swagger {
	ref := func(name string) spec.Schema { return *spec.RefSchema("#/definitions/" + name) }
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger: "2.0",
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{path: {PathItemProps: spec.PathItemProps{Get: &spec.Operation{
			OperationProps: spec.OperationProps{ID: "readWidget", Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{
				StatusCodeResponses: map[int]spec.Response{200: {ResponseProps: spec.ResponseProps{Description: "OK", Schema: spec.RefSchema("#/definitions/com.example.v1.Widget")}}},
			}}},
		}}}}},
		Definitions: spec.Definitions{
			"com.example.v1.Widget": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
				"metadata": ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
			}}},
			// Not kgate's ObjectMeta: renamed as kube-aggregator does.
			"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Description: "the extension's own"}},
		},
	}}
}

// TestRemoteSpecs: the extension servers' v2 paths and definitions are
// merged into /openapi/v2 after kgate's (a conflicting definition
// renamed, kgate's paths kept), their v3 documents join the index with
// hashes of their own, a key kgate serves is never shadowed, and the
// documents follow the remote's changes.
func TestRemoteSpecs(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(reg, version.Info{GitVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	v3doc := []byte(`{"openapi":"3.0.0","info":{"title":"example","version":"v1"},"paths":{"/apis/example.com/v1/widgets":{}}}`)
	r := &remote{}
	r.set(RemoteSpecs{
		V2: []*spec.Swagger{extensionV2("/apis/example.com/v1/widgets"), extensionV2("/api/v1/namespaces")},
		V3: map[string][]byte{"apis/example.com/v1": v3doc, "api/v1": []byte(`{"openapi":"3.0.0","paths":{}}`)},
	})
	o.SetRemote(r)
	settle(o)
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}

	resp, _ := o.Serve("/openapi/v2", "", "application/json")
	var v2 spec.Swagger
	if err := json.Unmarshal(resp.Body, &v2); err != nil {
		t.Fatal(err)
	}
	if _, ok := v2.Paths.Paths["/apis/example.com/v1/widgets"]; !ok {
		t.Error("/openapi/v2 lacks the extension's path")
	}
	if ns := v2.Paths.Paths["/api/v1/namespaces"]; ns.Get == nil || ns.Get.ID != "listCoreV1Namespace" {
		t.Errorf("kgate's own /api/v1/namespaces was replaced: %+v", ns.Get)
	}
	widget, ok := v2.Definitions["com.example.v1.Widget"]
	if !ok {
		t.Fatal("/openapi/v2 lacks the extension's definition")
	}
	meta := widget.Properties["metadata"]
	if got := meta.Ref.String(); got != "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta_v2" {
		t.Errorf("the extension's metadata refers to %q, want its renamed ObjectMeta_v2", got)
	}
	if d := v2.Definitions["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].Description; strings.Contains(d, "extension") {
		t.Error("kgate's ObjectMeta was replaced by the extension's")
	}

	resp, _ = o.Serve("/openapi/v3", "", "")
	var index indexDocument
	if err := json.Unmarshal(resp.Body, &index); err != nil {
		t.Fatal(err)
	}
	entry, ok := index.Paths["apis/example.com/v1"]
	if !ok {
		t.Fatal("the v3 index lacks apis/example.com/v1")
	}
	hash := strings.TrimPrefix(entry.ServerRelativeURL, "/openapi/v3/apis/example.com/v1?hash=")
	if resp, _ := o.Serve("/openapi/v3/apis/example.com/v1", hash, "application/json"); resp.Status != http.StatusOK || string(resp.Body) != string(v3doc) || !resp.Immutable {
		t.Errorf("the extension's v3 document at its hash: %d %q", resp.Status, resp.Body)
	}
	if resp, _ := o.Serve("/openapi/v3/api/v1", "", "application/json"); !strings.Contains(string(resp.Body), "listCoreV1Namespace") {
		t.Error("an extension's api/v1 document shadowed kgate's")
	}

	// The extension goes: its documents go too.
	r.set(RemoteSpecs{})
	settle(o)
	if _, ok := o.Serve("/openapi/v3/apis/example.com/v1", "", ""); ok {
		t.Error("the extension's v3 document outlived it")
	}
	resp, _ = o.Serve("/openapi/v2", "", "application/json")
	if strings.Contains(string(resp.Body), "com.example.v1.Widget") {
		t.Error("the extension's definitions outlived it")
	}
}
