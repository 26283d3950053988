// Package defs gives the OpenAPI definitions of the Kubernetes API types
// exactly as kube-apiserver publishes them: the schemas generated from the
// types' comment markers into k8s.io/kubernetes/pkg/generated/openapi
// (descriptions, required fields, defaults, enums, list and map types,
// patch strategies and merge keys), with OpenAPIEnums reverted when that
// feature gate is off (k8s.io/apiserver's
// GetOpenAPIDefinitionsWithoutDisabledFeatures), each definition of a kind
// tagged with x-kubernetes-group-version-kind from a scheme (k8s.io/apiserver's
// DefinitionNamer), and put together by kube-openapi's builders: V2 with
// "#/definitions/" references, V3 with "#/components/schemas/" references
// and described references wrapped in allOf.
//
// Definitions are named as kube-apiserver names them
// ("io.k8s.api.core.v1.Pod", the types' OpenAPIModelName).
package defs

import (
	"fmt"
	"maps"
	"sort"
	"sync"

	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generated "k8s.io/kubernetes/pkg/generated/openapi"
)

// Definitions are the OpenAPI definitions of the types of one scheme. It
// is safe for concurrent use; the schemas it returns share their parts
// with it and with each other and must not be modified.
type Definitions struct {
	scheme *runtime.Scheme
	namer  *apiopenapi.DefinitionNamer
	get    common.GetOpenAPIDefinitions

	// mu serializes the v3 builder, which writes the kinds into (and drops
	// the v2 form from) the extension maps of v3's definitions.
	mu sync.Mutex
	v3 map[string]common.OpenAPIDefinition // references to #/components/schemas/
}

// New returns the definitions of every generated API type, the kinds of
// scheme tagged with their group/version/kinds.
func New(scheme *runtime.Scheme) *Definitions {
	d := &Definitions{
		scheme: scheme,
		namer:  apiopenapi.NewDefinitionNamer(scheme),
		get:    utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedDefinitions),
	}
	d.v3 = d.get(d.ref("#/components/schemas/"))
	return d
}

// generatedDefinitions are k8s.io/kubernetes's generated definitions
// plus apiextensions-apiserver's (CustomResourceDefinition and its parts)
// and kube-aggregator's (APIService), which kube-apiserver serves from its
// apiextensions and aggregator servers; a name several define is the same
// type, kept from the first.
func generatedDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	out := generated.GetOpenAPIDefinitions(ref)
	for _, more := range []common.GetOpenAPIDefinitions{apiextensionsopenapi.GetOpenAPIDefinitions, aggregatoropenapi.GetOpenAPIDefinitions} {
		for name, def := range more(ref) {
			if _, ok := out[name]; !ok {
				out[name] = def
			}
		}
	}
	return out
}

// ref is the reference callback of the generated definitions.
func (d *Definitions) ref(prefix string) common.ReferenceCallback {
	return func(name string) spec.Ref {
		n, _ := d.namer.GetDefinitionName(name)
		return spec.MustCreateRef(prefix + common.EscapeJsonPointer(n))
	}
}

// Has reports whether name ("io.k8s.api.core.v1.Pod") is a definition.
func (d *Definitions) Has(name string) bool {
	_, ok := d.v3[name]
	return ok
}

// Name returns the definition name of the type the scheme registers for
// gvk; ok is false when the scheme does not know gvk or no definition
// describes its type (a custom resource).
func (d *Definitions) Name(gvk schema.GroupVersionKind) (name string, ok bool) {
	if !d.scheme.Recognizes(gvk) {
		return "", false
	}
	name, err := d.scheme.ToOpenAPIDefinitionName(gvk)
	if err != nil || !d.Has(name) {
		return "", false
	}
	return name, true
}

// V3 returns the OpenAPI v3 schemas of names and of every definition they
// refer to, by name, as the components of kube-apiserver's
// /openapi/v3/<group>/<version> documents.
func (d *Definitions) V3(names ...string) (map[string]*spec.Schema, error) {
	d.mu.Lock()
	schemas, err := builder3.BuildOpenAPIDefinitionsForResources(&common.OpenAPIV3Config{
		Definitions:       d.v3,
		GetDefinitionName: d.namer.GetDefinitionName,
	}, names...)
	if err == nil {
		// The extension maps are the definitions' own, which the next
		// build writes again: hand out copies.
		for _, s := range schemas {
			s.Extensions = maps.Clone(s.Extensions)
		}
	}
	d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cannot build OpenAPI v3 definitions: %w", err)
	}
	return schemas, nil
}

// V2 returns the OpenAPI v2 (Swagger 2.0) definitions of names and of
// every definition they refer to, as kube-apiserver's /openapi/v2.
func (d *Definitions) V2(names ...string) (spec.Definitions, error) {
	v2 := d.get(d.ref("#/definitions/"))
	swagger, err := builder.BuildOpenAPIDefinitionsForResources(&common.Config{
		GetDefinitions:    func(common.ReferenceCallback) map[string]common.OpenAPIDefinition { return v2 },
		GetDefinitionName: d.namer.GetDefinitionName,
	}, names...)
	if err != nil {
		return nil, fmt.Errorf("cannot build OpenAPI v2 definitions: %w", err)
	}
	return swagger.Definitions, nil
}

// Schemas returns, in the OpenAPI v3 form and by name, the definitions of
// the scheme's kinds and every definition they refer to: what
// kube-apiserver hands its field manager's type converter
// (managedfields.NewTypeConverter) for the resources it serves.
func (d *Definitions) Schemas() (map[string]*spec.Schema, error) {
	seen := map[string]bool{}
	var names []string
	for gvk := range d.scheme.AllKnownTypes() {
		if name, ok := d.Name(gvk); ok && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return d.V3(names...)
}

// Schemas returns the OpenAPI v3 definitions of the kinds of scheme and
// of every definition they refer to, by name, the kinds tagged with their
// group/version/kinds.
func Schemas(scheme *runtime.Scheme) (map[string]*spec.Schema, error) {
	return New(scheme).Schemas()
}
