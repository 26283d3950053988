package openapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi/cached"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
	kopenapi "k8s.io/kubectl/pkg/util/openapi"

	"github.com/kgate/kgate/storage/crds"
	"github.com/kgate/kgate/storage/registry"
)

// cronTabCRD is a namespaced CRD with two served versions, status and
// scale subresources, descriptions, a required field, a default and an
// enum.
func cronTabCRD() *apiextensionsv1.CustomResourceDefinition {
	props := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {
					Type:        "object",
					Description: desc,
					Required:    []string{"cronSpec"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"cronSpec": {Type: "string", Description: "When the job runs, in cron syntax."},
						"image":    {Type: "string", Description: "The image the job runs."},
						"replicas": {Type: "integer", Description: "How many jobs run at once.", Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
						"policy":   {Type: "string", Description: "What happens to a late job.", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Skip"`)}, {Raw: []byte(`"Run"`)}}},
					},
				},
				"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
			},
		}
	}
	version := func(name, desc string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		s := props(desc)
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s},
			Subresources: &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
				Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
			},
		}
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ListKind: "CronTabList", ShortNames: []string{"ct"}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com", Names: names, Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", "The schedule of a CronTab (v1).", true), version("v1beta1", "The schedule of a CronTab (v1beta1).", false)},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames:  names,
			StoredVersions: []string{"v1"},
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
			},
		},
	}
}

// TestCustomResource: a custom resource added to the registry is
// described from its CRD's schema, by apiextensions-apiserver's builder,
// in its group/version document and in /openapi/v2, and kubectl's readers
// (explain, field validation, v2 resources) find it.
func TestCustomResource(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(reg, version.Info{GitVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	crd := cronTabCRD()
	resources := crds.Resources(crd)
	if len(resources) != 2 {
		t.Fatalf("crds.Resources: %d resources, want 2", len(resources))
	}
	if err := reg.Add(resources...); err != nil {
		t.Fatal(err)
	}
	settle(o)
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
	const kindName = "com.example.stable.v1.CronTab"
	gvk := schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"}
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

	t.Run("V3", func(t *testing.T) {
		var doc spec3.OpenAPI
		if err := json.Unmarshal(o.current().v3["apis/stable.example.com/v1"].json, &doc); err != nil {
			t.Fatal(err)
		}
		want, err := builder.BuildOpenAPIV3(crd, "v1", builderOptions(false))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{kindName, kindName + "List"} {
			if !jsonEqual(t, doc.Components.Schemas[name], want.Components.Schemas[name]) {
				t.Errorf("schema %s differs from apiextensions' builder's", name)
			}
		}
		for path, p := range want.Paths.Paths {
			if !jsonEqual(t, doc.Paths.Paths[path], p) {
				t.Errorf("path %s differs from apiextensions' builder's", path)
			}
		}
		if !supportsStrategicMergePatch(want, gvk) && supportsStrategicMergePatch(&doc, gvk) {
			t.Error("PATCH of a custom resource accepts strategic merge patch")
		}
		// Each version is described from its own schema.
		var beta spec3.OpenAPI
		if err := json.Unmarshal(o.current().v3["apis/stable.example.com/v1beta1"].json, &beta); err != nil {
			t.Fatal(err)
		}
		if s := beta.Components.Schemas["com.example.stable.v1beta1.CronTab"]; s == nil || s.Properties["spec"].Description != "The schedule of a CronTab (v1beta1)." {
			t.Errorf("v1beta1 schema: %v", s)
		}
	})
	t.Run("References", func(t *testing.T) { testReferences(t, o) })

	srv := httptest.NewServer(handler(o))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := cached.NewClient(dc.OpenAPIV3())

	t.Run("Explain", func(t *testing.T) {
		var out bytes.Buffer
		if err := explainv2.PrintModelDescription([]string{"spec"}, &out, client, gvr, false, 0, "plaintext"); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"KIND:       CronTab", "VERSION:    v1", "The schedule of a CronTab (v1).", "cronSpec\t<string> -required-",
			"When the job runs, in cron syntax.", "replicas\t<integer>", "How many jobs run at once.", "policy\t<string>", "enum: Skip, Run"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("explain crontabs.spec lacks %q:\n%s", want, out.String())
			}
		}
	})
	t.Run("FieldValidation", func(t *testing.T) {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		v3 := resource.NewQueryParamVerifierV3(dyn, client, resource.QueryParamFieldValidation)
		v2 := resource.NewQueryParamVerifier(dyn, kopenapi.NewOpenAPIGetter(dc), resource.QueryParamFieldValidation)
		for name, v := range map[string]resource.Verifier{"v3": v3, "v2": v2} {
			if err := v.HasSupport(gvk); err != nil {
				t.Errorf("%s: HasSupport(%v) = %v, want supported", name, gvk, err)
			}
		}
	})
	t.Run("V2", func(t *testing.T) {
		doc, err := dc.OpenAPISchema()
		if err != nil {
			t.Fatal(err)
		}
		models, err := kopenapi.NewOpenAPIData(doc)
		if err != nil {
			t.Fatal(err)
		}
		if models.LookupResource(gvk) == nil {
			t.Errorf("v2 lacks %v", gvk)
		}
		var swagger spec.Swagger
		if err := json.Unmarshal(o.current().v2.json, &swagger); err != nil {
			t.Fatal(err)
		}
		want, err := builder.BuildOpenAPIV2(crd, "v1", builderOptions(true))
		if err != nil {
			t.Fatal(err)
		}
		for path, p := range want.Paths.Paths {
			if !jsonEqual(t, swagger.Paths.Paths[path], p) {
				t.Errorf("v2 path %s differs from apiextensions' builder's", path)
			}
		}
		s, ok := swagger.Definitions[kindName]
		if !ok {
			t.Fatalf("v2 lacks definition %s", kindName)
		}
		spec := s.Properties["spec"]
		if spec.Properties["cronSpec"].Description != "When the job runs, in cron syntax." || !slices.Equal(spec.Required, []string{"cronSpec"}) {
			t.Errorf("v2 %s spec: %+v", kindName, spec)
		}
		if spec.Properties["replicas"].Default != nil {
			t.Error("v2 keeps a default; kube-apiserver prunes them from /openapi/v2")
		}
		patch := swagger.Paths.Paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"].Patch
		if patch == nil || slices.Contains(patch.Consumes, "application/strategic-merge-patch+json") {
			t.Errorf("v2 PATCH of a custom resource: %+v", patch)
		}
	})

	// Removed with its CRD, the resource leaves the documents.
	if err := reg.Remove(resources[0].GVR(), resources[1].GVR()); err != nil {
		t.Fatal(err)
	}
	settle(o)
	if _, ok := o.current().v3["apis/stable.example.com/v1"]; ok {
		t.Error("the group/version document remains after the CRD went")
	}
	if bytes.Contains(o.current().v2.json, []byte("stable.example.com")) {
		t.Error("/openapi/v2 still describes the custom resource")
	}
}

// jsonEqual compares the JSON forms of a and b.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var va, vb any
	if err := json.Unmarshal(ja, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jb, &vb); err != nil {
		t.Fatal(err)
	}
	return string(mustJSON(va)) == string(mustJSON(vb))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
