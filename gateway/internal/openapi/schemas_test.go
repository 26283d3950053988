package openapi

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	builderutil "k8s.io/kube-openapi/pkg/builder3/util"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generated "k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/kgate/kgate/gateway/internal/openapi/defs"
	"github.com/kgate/kgate/storage/registry"
)

// upstream returns kube-apiserver's generated definitions with references
// in prefix, called directly.
func upstream(prefix string) map[string]common.OpenAPIDefinition {
	return generated.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef(prefix + name)
	})
}

// TestSchemasFromUpstream: the served documents carry kube-apiserver's
// generated definitions (required fields, enums, defaults, list types,
// patch strategies), each checked against GetOpenAPIDefinitions.
func TestSchemasFromUpstream(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(reg, version.Info{GitVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	v3 := upstream("#/components/schemas/")
	v2 := upstream("#/definitions/")

	core := servedV3(t, o, "api/v1")
	apps := servedV3(t, o, "apis/apps/v1")
	var swagger spec.Swagger
	if err := json.Unmarshal(o.current().v2.json, &swagger); err != nil {
		t.Fatal(err)
	}

	prop := func(doc map[string]*spec.Schema, def, field string) spec.Schema {
		t.Helper()
		s := doc[def]
		if s == nil {
			t.Fatalf("no definition %s", def)
		}
		p, ok := s.Properties[field]
		if !ok {
			t.Fatalf("%s has no property %s", def, field)
		}
		return p
	}
	upProp := func(def, field string) spec.Schema {
		t.Helper()
		p, ok := v3[def].Schema.Properties[field]
		if !ok {
			t.Fatalf("upstream %s has no property %s", def, field)
		}
		return p
	}
	const (
		podSpec     = "io.k8s.api.core.v1.PodSpec"
		serviceSpec = "io.k8s.api.core.v1.ServiceSpec"
		port        = "io.k8s.api.core.v1.ContainerPort"
		pod         = "io.k8s.api.core.v1.Pod"
	)

	t.Run("Required", func(t *testing.T) {
		want := v3[podSpec].Schema.Required
		if !slices.Contains(want, "containers") {
			t.Fatalf("upstream PodSpec.required = %v, lacks containers", want)
		}
		if got := core[podSpec].Required; !slices.Equal(got, want) {
			t.Errorf("v3 PodSpec.required = %v, want %v", got, want)
		}
		if got := swagger.Definitions[podSpec].Required; !slices.Equal(got, want) {
			t.Errorf("v2 PodSpec.required = %v, want %v", got, want)
		}
	})
	t.Run("Enum", func(t *testing.T) {
		for _, f := range []struct{ def, field string }{{serviceSpec, "type"}, {podSpec, "restartPolicy"}} {
			want := upProp(f.def, f.field).Enum
			if len(want) == 0 {
				t.Fatalf("upstream %s.%s has no enum", f.def, f.field)
			}
			if got := prop(core, f.def, f.field).Enum; !reflect.DeepEqual(got, want) {
				t.Errorf("v3 %s.%s enum = %v, want %v", f.def, f.field, got, want)
			}
			if got := swagger.Definitions[f.def].Properties[f.field].Enum; !reflect.DeepEqual(got, want) {
				t.Errorf("v2 %s.%s enum = %v, want %v", f.def, f.field, got, want)
			}
		}
	})
	t.Run("Default", func(t *testing.T) {
		want := upProp(port, "protocol").Default
		if want != "TCP" {
			t.Fatalf("upstream ContainerPort.protocol default = %v", want)
		}
		if got := prop(core, port, "protocol").Default; got != want {
			t.Errorf("v3 ContainerPort.protocol default = %v, want %v", got, want)
		}
		if got := prop(apps, port, "protocol").Default; got != want {
			t.Errorf("apps/v1 ContainerPort.protocol default = %v, want %v", got, want)
		}
	})
	t.Run("ListMapKeys", func(t *testing.T) {
		want := upProp(podSpec, "containers").Extensions
		for _, k := range []string{"x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key"} {
			if _, ok := want[k]; !ok {
				t.Fatalf("upstream PodSpec.containers lacks %s: %v", k, want)
			}
		}
		if got := prop(core, podSpec, "containers").Extensions; !sameJSON(got, want) {
			t.Errorf("v3 PodSpec.containers extensions = %v, want %v", got, want)
		}
		if got := swagger.Definitions[podSpec].Properties["containers"].Extensions; !sameJSON(got, want) {
			t.Errorf("v2 PodSpec.containers extensions = %v, want %v", got, want)
		}
	})
	t.Run("GroupVersionKind", func(t *testing.T) {
		kinds, _, err := reg.Scheme().ObjectKinds(&corev1.Pod{})
		if err != nil {
			t.Fatal(err)
		}
		var want []any
		for _, k := range kinds {
			want = append(want, map[string]any{"group": k.Group, "version": k.Version, "kind": k.Kind})
		}
		if got := core[pod].Extensions[gvkExtension]; !sameJSON(got, want) {
			t.Errorf("v3 Pod kinds = %v, want %v", got, want)
		}
		if got := swagger.Definitions[pod].Extensions[gvkExtension]; !sameJSON(got, want) {
			t.Errorf("v2 Pod kinds = %v, want %v", got, want)
		}
	})
	// Every schema of the documents, whole: upstream's, references
	// wrapped in allOf in v3, with the kinds from the scheme.
	t.Run("Whole", func(t *testing.T) {
		for key, doc := range map[string]map[string]*spec.Schema{"api/v1": core, "apis/apps/v1": apps} {
			if len(doc) < 100 {
				t.Errorf("%s: only %d schemas", key, len(doc))
			}
			for name, got := range doc {
				def, ok := v3[name]
				if !ok {
					t.Errorf("%s: %s is not an upstream definition", key, name)
					continue
				}
				// A definition may carry its v2 form in an extension
				// (Quantity, IntOrString): v3 drops it.
				up := withoutKinds(def.Schema)
				delete(up.Extensions, common.ExtensionV2Schema)
				want := builderutil.WrapRefs(&up)
				if !sameJSON(withoutKinds(*got), withoutKinds(*want)) {
					t.Errorf("%s: %s differs from upstream's definition", key, name)
				}
			}
		}
		if len(swagger.Definitions) < len(core) {
			t.Errorf("v2: only %d definitions", len(swagger.Definitions))
		}
		for name, got := range swagger.Definitions {
			def, ok := v2[name]
			if !ok {
				t.Errorf("v2: %s is not an upstream definition", name)
				continue
			}
			want := def.Schema
			if v2Form, ok := want.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
				want = v2Form // the v2 document takes the v2 form
			}
			if !sameJSON(withoutKinds(got), withoutKinds(want)) {
				t.Errorf("v2: %s differs from upstream's definition", name)
			}
		}
	})
}

// servedV3 decodes the components of the served group/version document.
func servedV3(t *testing.T, o *Documents, key string) map[string]*spec.Schema {
	t.Helper()
	resp, ok := o.Serve("/openapi/v3/"+key, "", "application/json")
	if !ok || resp.Status != 200 {
		t.Fatalf("%s: not served", key)
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas
}

func withoutKinds(s spec.Schema) spec.Schema {
	s.Extensions = maps.Clone(s.Extensions)
	delete(s.Extensions, gvkExtension)
	return s
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	var u, v any
	return err1 == nil && err2 == nil && json.Unmarshal(x, &u) == nil && json.Unmarshal(y, &v) == nil && reflect.DeepEqual(u, v)
}

// TestCustomKind: a served kind without a generated definition (a custom
// resource) is an object of any fields, tagged with its kind, and does not
// break rendering.
func TestCustomKind(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	b := newPathsBuilder(defs.New(scheme), "ExampleComV1", "exampleCom_v1")
	gv := schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	b.gv = &gv
	b.resource(&registry.Resource{Group: gv.Group, Version: gv.Version, Resource: "crontabs", Kind: "CronTab", Namespaced: true,
		Subresources: []string{"status", "scale"}}, metaNames{
		deleteOptions: "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", status: "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
		patch: "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", watchEvent: "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
	})
	doc, err := b.document(documentTitle, "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"CronTab", "CronTabList"} {
		s := doc.Components.Schemas["com.example.stable.v1."+kind]
		if s == nil {
			t.Fatalf("no schema for %s: %v", kind, slices.Sorted(maps.Keys(doc.Components.Schemas)))
		}
		want := []any{map[string]any{"group": gv.Group, "version": gv.Version, "kind": kind}}
		if s.Extensions["x-kubernetes-preserve-unknown-fields"] != true || !sameJSON(s.Extensions[gvkExtension], want) {
			t.Errorf("%s: extensions %v", kind, s.Extensions)
		}
	}
	// The scale subresource still refers to upstream's Scale.
	if doc.Components.Schemas["io.k8s.api.autoscaling.v1.Scale"] == nil {
		t.Error("no autoscaling/v1 Scale for the scale subresource")
	}
	if _, err := json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
}
