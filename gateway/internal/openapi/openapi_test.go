package openapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/cached"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
	kopenapi "k8s.io/kubectl/pkg/util/openapi"
	"k8s.io/kubectl/pkg/validation"

	"github.com/kgate/kgate/storage/registry"
)

// TestOpenAPI builds the documents once (about a second) and checks them
// with the client code that reads them.
func TestOpenAPI(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(reg, version.Info{GitVersion: "v1.37.2+kgate"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(o))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := cached.NewClient(dc.OpenAPIV3())
	root := openapi3.NewRoot(client)

	t.Run("Index", func(t *testing.T) { testIndex(t, root) })
	t.Run("References", func(t *testing.T) { testReferences(t, o) })
	t.Run("Serve", func(t *testing.T) { testServe(t, o) })
	t.Run("FieldValidation", func(t *testing.T) { testFieldValidation(t, cfg, client) })
	t.Run("KubectlValidation", func(t *testing.T) { testKubectlValidation(t, cfg, dc, client) })
	t.Run("StrategicMergePatch", func(t *testing.T) { testStrategicMergePatch(t, root) })
	t.Run("Explain", func(t *testing.T) { testExplain(t, client) })
	t.Run("V2", func(t *testing.T) { testV2(t, dc) })

	// Gateways behind one load balancer must publish the same hashes, or
	// clients would be redirected from one pod's hash to another's.
	again, err := New(reg, version.Info{GitVersion: "v1.37.2+kgate"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o.current().root.json, again.current().root.json) || !bytes.Equal(o.current().v2.json, again.current().v2.json) {
		t.Error("documents differ between two builds")
	}
}

// handler wraps Serve the way the gateway's router does. It also lists
// the cluster's CustomResourceDefinitions (none) as the gateway does:
// kubectl's field validation verifier lists them to tell a custom
// resource from a kind without a PATCH operation.
func handler(o *Documents) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinitionList","metadata":{"resourceVersion":"1"},"items":[]}`))
			return
		}
		resp, ok := o.Serve(r.URL.Path, r.URL.Query().Get("hash"), r.Header.Get("Accept"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		if resp.Location != "" {
			http.Redirect(w, r, resp.Location, resp.Status)
			return
		}
		if resp.Vary {
			w.Header().Set("Vary", "Accept")
		}
		if resp.ETag != "" {
			w.Header().Set("ETag", resp.ETag)
			if resp.NotModified(r.Header.Get("If-None-Match")) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		if resp.Immutable {
			w.Header().Set("Cache-Control", "public, immutable")
		}
		if resp.ContentType != "" {
			w.Header().Set("Content-Type", resp.ContentType)
		}
		w.WriteHeader(resp.Status)
		_, _ = w.Write(resp.Body)
	})
}

func testIndex(t *testing.T, root openapi3.Root) {
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []schema.GroupVersion{
		{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "batch", Version: "v1"},
		{Group: "rbac.authorization.k8s.io", Version: "v1"}, {Group: "autoscaling", Version: "v2"},
	} {
		found := false
		for _, gv := range gvs {
			found = found || gv == want
		}
		if !found {
			t.Errorf("index lacks %v: %v", want, gvs)
		}
	}
	for _, gv := range gvs {
		doc, err := root.GVSpec(gv)
		if err != nil {
			t.Errorf("GVSpec(%v): %v", gv, err)
			continue
		}
		if doc.Version != "3.0.0" || doc.Paths == nil || len(doc.Paths.Paths) == 0 || doc.Components == nil || len(doc.Components.Schemas) == 0 {
			t.Errorf("GVSpec(%v) is incomplete", gv)
		}
	}
}

// testReferences checks every document parses with kube-openapi's spec3
// types and that each $ref resolves inside the document.
func testReferences(t *testing.T, o *Documents) {
	for key, doc := range o.current().v3 {
		// The protobuf form is made on the first request: check that
		// every document has one.
		if pb, err := doc.protobuf(); err != nil || len(pb) == 0 {
			t.Errorf("%s: protobuf form: %v", key, err)
		}
		var parsed spec3.OpenAPI
		if err := json.Unmarshal(doc.json, &parsed); err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		var raw any
		if err := json.Unmarshal(doc.json, &raw); err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs(raw) {
			name, ok := strings.CutPrefix(ref, "#/components/schemas/")
			if !ok || parsed.Components.Schemas[name] == nil {
				t.Errorf("%s: dangling reference %s", key, ref)
			}
		}
	}
	if pb, err := o.current().v2.protobuf(); err != nil || len(pb) == 0 {
		t.Errorf("v2: protobuf form: %v", err)
	}
	var v2 map[string]any
	if err := json.Unmarshal(o.current().v2.json, &v2); err != nil {
		t.Fatal(err)
	}
	defs := v2["definitions"].(map[string]any)
	params, _ := v2["parameters"].(map[string]any) // parameters shared by custom resources' operations
	for _, ref := range refs(v2) {
		if name, ok := strings.CutPrefix(ref, "#/parameters/"); ok && params[name] != nil {
			continue
		}
		name, ok := strings.CutPrefix(ref, "#/definitions/")
		if !ok || defs[name] == nil {
			t.Errorf("v2: dangling reference %s", ref)
		}
	}
}

func refs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				out = append(out, s)
			} else {
				out = append(out, refs(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, refs(x)...)
		}
	}
	return out
}

func testServe(t *testing.T, o *Documents) {
	doc := o.current().v3["apis/apps/v1"]
	tests := []struct {
		name, path, hash, accept string
		ok                       bool
		status                   int
		contentType, location    string
		immutable                bool
	}{
		{"index", "/openapi/v3", "", "", true, 200, "application/json", "", false},
		{"document", "/openapi/v3/apis/apps/v1", "", "application/json", true, 200, "application/json", "", false},
		{"current hash", "/openapi/v3/apis/apps/v1", doc.hash, "application/json", true, 200, "application/json", "", true},
		{"stale hash", "/openapi/v3/apis/apps/v1", "OLD", "application/json", true, 301, "", "/openapi/v3/apis/apps/v1?hash=" + doc.hash, false},
		{"protobuf", "/openapi/v3/apis/apps/v1", "", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", true, 200, contentV3Protobuf, "", false},
		{"not acceptable", "/openapi/v3/apis/apps/v1", "", "text/html", true, 406, "", "", false},
		{"v2 protobuf", "/openapi/v2", "", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", true, 200, contentV2Protobuf, "", false},
		{"v2 json", "/openapi/v2", "", "application/json", true, 200, "application/json", "", false},
		{"v2 not acceptable", "/openapi/v2", "", "text/html", true, 406, "", "", false},
		{"group", "/openapi/v3/apis/apps", "", "", true, 200, "application/json", "", false},
		{"unknown version", "/openapi/v3/apis/apps/v2", "", "", false, 0, "", "", false},
		{"not openapi", "/openapi/v4", "", "", false, 0, "", "", false},
	}
	for _, tc := range tests {
		resp, ok := o.Serve(tc.path, tc.hash, tc.accept)
		if ok != tc.ok || resp.Status != tc.status || resp.ContentType != tc.contentType || resp.Location != tc.location || resp.Immutable != tc.immutable {
			t.Errorf("%s: Serve = %v %d %q %q immutable=%v", tc.name, ok, resp.Status, resp.ContentType, resp.Location, resp.Immutable)
		}
	}
	resp, _ := o.Serve("/openapi/v3/apis/apps/v1", "", contentV3Protobuf)
	var pb openapiv3.Document
	if err := proto.Unmarshal(resp.Body, &pb); err != nil || pb.GetOpenapi() != "3.0.0" {
		t.Errorf("protobuf document: %v", err)
	}
	for _, tc := range []struct {
		ifNoneMatch string
		want        bool
	}{
		{resp.ETag, true},
		{"", false},
		{`"other"`, false},
		{`"other", ` + resp.ETag, true},
		{"W/" + resp.ETag, true},
		{"*", true},
		{strings.Trim(resp.ETag, `"`), false},
	} {
		if got := resp.NotModified(tc.ifNoneMatch); got != tc.want {
			t.Errorf("NotModified(%.20q) = %v, want %v", tc.ifNoneMatch, got, tc.want)
		}
	}
	if (Response{Status: 406, ETag: resp.ETag}).NotModified(resp.ETag) {
		t.Error("NotModified of a 406 = true")
	}
	// Group/version documents vary with Accept (JSON or protobuf), the
	// index does not.
	if gv, _ := o.Serve("/openapi/v3/apis/apps/v1", doc.hash, ""); !gv.Vary || gv.ETag != doc.etag {
		t.Errorf("group/version document: Vary %v, ETag %.20q", gv.Vary, gv.ETag)
	}
	if index, _ := o.Serve("/openapi/v3", "", ""); index.Vary || index.ETag == "" {
		t.Errorf("index: Vary %v, ETag %.20q", index.Vary, index.ETag)
	}
}

func testFieldValidation(t *testing.T, cfg *rest.Config, client openapi.Client) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	verifier := resource.NewQueryParamVerifierV3(dyn, client, resource.QueryParamFieldValidation)
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Version: "v1", Kind: "ConfigMap"},
		{Version: "v1", Kind: "Namespace"},
		{Group: "batch", Version: "v1", Kind: "CronJob"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
	} {
		if err := verifier.HasSupport(gvk); err != nil {
			t.Errorf("HasSupport(%v) = %v, want supported", gvk, err)
		}
	}
	if err := verifier.HasSupport(schema.GroupVersionKind{Version: "v1", Kind: "List"}); !resource.IsParamUnsupportedError(err) {
		t.Errorf("HasSupport(List) = %v, want unsupported", err)
	}
}

// resourcesGetter adapts kubectl's cached v2 parser to the interface its
// schema validation takes (the kubectl factory does the same).
type resourcesGetter struct{ parser *kopenapi.CachedOpenAPIParser }

func (g resourcesGetter) OpenAPISchema() (kopenapi.Resources, error) { return g.parser.Parse() }

// testKubectlValidation assembles kubectl's validator the way its factory
// does for --validate=strict (the default) and feeds it manifests.
func testKubectlValidation(t *testing.T, cfg *rest.Config, dc *discovery.DiscoveryClient, client openapi.Client) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	primary := resource.NewQueryParamVerifierV3(dyn, client, resource.QueryParamFieldValidation)
	secondary := resource.NewQueryParamVerifier(dyn, kopenapi.NewOpenAPIGetter(dc), resource.QueryParamFieldValidation)
	schemas := validation.ConjunctiveSchema{
		validation.NewSchemaValidation(resourcesGetter{kopenapi.NewOpenAPIParser(kopenapi.NewOpenAPIGetter(dc))}),
		validation.NoDoubleKeySchema{},
	}
	validator := validation.NewParamVerifyingSchema(schemas, resource.NewFallbackQueryParamVerifier(primary, secondary), "Strict")

	// /openapi/v2 has the paths too: kubectl versions that read only v2
	// see the server validate fields of every kind with a PATCH, and
	// validate the others (and custom resources without a CRD) themselves.
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Namespace"},
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	} {
		if err := secondary.HasSupport(gvk); err != nil {
			t.Errorf("v2: HasSupport(%v) = %v, want supported", gvk, err)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "Binding"}, {Group: "example.com", Version: "v1", Kind: "Unknown"}} {
		if err := secondary.HasSupport(gvk); !resource.IsParamUnsupportedError(err) {
			t.Errorf("v2: HasSupport(%v) = %v, want unsupported", gvk, err)
		}
	}

	// kubectl's resource builder hands the validator each document
	// converted to JSON.
	f := func(name, manifest string, wantErr bool) {
		t.Helper()
		data, err := yaml.ToJSON([]byte(manifest))
		if err != nil {
			t.Fatal(err)
		}
		err = validator.ValidateBytes(data)
		if (err != nil) != wantErr {
			t.Errorf("%s: ValidateBytes = %v, want error %v", name, err, wantErr)
		}
	}
	f("deployment", deploymentYAML, false)
	f("deployment with unknown field (the server rejects it)", strings.Replace(deploymentYAML, "replicas: 2", "replicas: 2\n  bogus: 1", 1), false)
	f("configmap", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n", false)
	f("create-only kind", "apiVersion: v1\nkind: Binding\nmetadata:\n  name: p\ntarget:\n  kind: Node\n  name: n\n", false)
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: s\n  spec:\n    ports:\n    - port: 80\n      targetPort: web\n    selector:\n      app: x\n"
	f("list", list, false)
	f("list of a deployment", "apiVersion: v1\nkind: List\nitems:\n- "+strings.ReplaceAll(strings.TrimSpace(deploymentYAML), "\n", "\n  ")+"\n", false)
	f("list with unknown field", strings.Replace(list, "port: 80", "port: 80\n      bogus: 1", 1), true)
	f("list with wrong type", strings.Replace(list, "port: 80", "port: [80]", 1), true)
	// Duplicate keys are only caught client-side when the server cannot
	// check them (here: the List itself).
	dup := `{"apiVersion":"v1","kind":"List","metadata":{"labels":{"a":"b","a":"c"}},"items":[]}`
	if err := validator.ValidateBytes([]byte(dup)); err == nil {
		t.Error("duplicate label in a List: no error")
	}
}

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1
        resources:
          limits:
            cpu: 1
            memory: 1Gi
        ports:
        - containerPort: 80
`

// testStrategicMergePatch computes kubectl apply's three-way patch from
// the OpenAPI v3 schema, exactly as kubectl's Patcher does, and compares
// it with the patch computed from the Go types' struct tags.
func testStrategicMergePatch(t *testing.T, root openapi3.Root) {
	tests := []struct {
		gvk                         schema.GroupVersionKind
		obj                         any
		original, modified, current string
	}{
		{
			gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			obj: &appsv1.Deployment{},
			original: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"a":"1","b":"2"}},"spec":{"replicas":2,"template":{"spec":{
				"containers":[{"name":"nginx","image":"nginx:1","env":[{"name":"A","value":"1"}],"ports":[{"containerPort":80}]}],
				"volumes":[{"name":"data","emptyDir":{}}],"tolerations":[{"key":"k","operator":"Exists"}]}}}}`,
			modified: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"a":"1"}},"spec":{"replicas":3,"template":{"spec":{
				"containers":[{"name":"nginx","image":"nginx:2","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],"ports":[{"containerPort":80},{"containerPort":443}]}],
				"volumes":[{"name":"data","configMap":{"name":"cm"}}],"tolerations":[{"key":"other","operator":"Exists"}]}}}}`,
			current: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"a":"1","b":"2","c":"3"},"resourceVersion":"7"},"spec":{"replicas":2,"template":{"spec":{
				"containers":[{"name":"nginx","image":"nginx:1","env":[{"name":"A","value":"1"}],"ports":[{"containerPort":80,"protocol":"TCP"}],"terminationMessagePath":"/dev/termination-log"},
				{"name":"sidecar","image":"envoy"}],
				"volumes":[{"name":"data","emptyDir":{}},{"name":"injected","emptyDir":{}}],"tolerations":[{"key":"k","operator":"Exists"}]}}},"status":{"replicas":2}}`,
		},
		{
			gvk:      schema.GroupVersionKind{Version: "v1", Kind: "Service"},
			obj:      &corev1.Service{},
			original: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":8080}],"selector":{"app":"x"}}}`,
			modified: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":"web"},{"port":443}],"selector":{"app":"y"}}}`,
			current:  `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"clusterIP":"10.0.0.1","ports":[{"port":80,"protocol":"TCP","targetPort":8080}],"selector":{"app":"x"}}}`,
		},
	}
	for _, tc := range tests {
		doc, err := root.GVSpec(tc.gvk.GroupVersion())
		if err != nil {
			t.Fatal(err)
		}
		if !supportsStrategicMergePatch(doc, tc.gvk) {
			t.Errorf("%v: PATCH does not accept strategic merge patch", tc.gvk)
			continue
		}
		var lookup strategicpatch.LookupPatchMeta
		for _, s := range doc.Components.Schemas {
			if hasGVK(s.Extensions, tc.gvk) {
				lookup = strategicpatch.PatchMetaFromOpenAPIV3{Schema: s, SchemaList: doc.Components.Schemas}
			}
		}
		if lookup == nil {
			t.Errorf("%v: no schema carries the kind", tc.gvk)
			continue
		}
		fromSchema, err := strategicpatch.CreateThreeWayMergePatch([]byte(tc.original), []byte(tc.modified), []byte(tc.current), lookup, true)
		if err != nil {
			t.Errorf("%v: patch from OpenAPI: %v", tc.gvk, err)
			continue
		}
		structMeta, err := strategicpatch.NewPatchMetaFromStruct(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		fromStruct, err := strategicpatch.CreateThreeWayMergePatch([]byte(tc.original), []byte(tc.modified), []byte(tc.current), structMeta, true)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal(fromSchema, &a)
		_ = json.Unmarshal(fromStruct, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%v: patch from OpenAPI\n%s\ndiffers from patch from Go types\n%s", tc.gvk, fromSchema, fromStruct)
		}
	}
}

// supportsStrategicMergePatch is kubectl's Patcher.gvkSupportsPatchOpenAPIV3.
func supportsStrategicMergePatch(doc *spec3.OpenAPI, gvk schema.GroupVersionKind) bool {
	for _, p := range doc.Paths.Paths {
		if p.Patch == nil {
			continue
		}
		var got map[string]string
		if err := p.Patch.Extensions.GetObject("x-kubernetes-group-version-kind", &got); err != nil ||
			got["group"] != gvk.Group || got["version"] != gvk.Version || got["kind"] != gvk.Kind {
			continue
		}
		if p.Patch.RequestBody == nil {
			return false
		}
		_, ok := p.Patch.RequestBody.Content["application/strategic-merge-patch+json"]
		return ok
	}
	return false
}

func hasGVK(ext spec.Extensions, gvk schema.GroupVersionKind) bool {
	var list []map[string]string
	if err := ext.GetObject("x-kubernetes-group-version-kind", &list); err != nil {
		return false
	}
	for _, m := range list {
		if m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
			return true
		}
	}
	return false
}

func testExplain(t *testing.T, client openapi.Client) {
	f := func(gvr schema.GroupVersionResource, path []string, recursive bool, want ...string) {
		t.Helper()
		var out bytes.Buffer
		if err := explainv2.PrintModelDescription(path, &out, client, gvr, recursive, 0, "plaintext"); err != nil {
			t.Errorf("explain %v %v: %v", gvr, path, err)
			return
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("explain %v %v lacks %q:\n%s", gvr, path, w, out.String())
			}
		}
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	f(deployments, nil, false, "GROUP:      apps", "KIND:       Deployment", "VERSION:    v1", "Deployment enables declarative updates", "spec\t<DeploymentSpec>")
	f(deployments, []string{"spec", "template", "spec", "containers"}, false, "FIELD: containers <[]Container>", "List of containers belonging to the pod", "image\t<string>")
	f(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, []string{"spec", "containers", "resources", "limits"}, false, "FIELD: limits <map[string]Quantity>", "Limits describes the maximum amount")
	f(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, nil, true, "data\t<map[string]string>", "metadata\t<ObjectMeta>", "name\t<string>")
}

func testV2(t *testing.T, dc *discovery.DiscoveryClient) {
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	resources, err := kopenapi.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Version: "v1", Kind: "Pod"},
		{Group: "events.k8s.io", Version: "v1", Kind: "Event"},
	} {
		if resources.LookupResource(gvk) == nil {
			t.Errorf("v2 lacks %v", gvk)
		}
	}
}
