package openapi

import (
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apiextensionsfeatures "k8s.io/apiextensions-apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	openapihandler "k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/storage/registry"
)

// Custom resources are described as kube-apiserver's apiextensions server
// describes them: apiextensions-apiserver's OpenAPI builder turns the
// CRD's schema for one version into the paths of the resource and its
// subresources and the schemas of its kind and list kind (with the
// CRD's descriptions, required fields, defaults and x-kubernetes
// extensions, metadata as ObjectMeta); the meta definitions those refer
// to are upstream's, from package defs, like every other document's.

// builderOptions are the options kube-apiserver's OpenAPI controllers
// build a CRD's documents with (openapiv3.Controller, openapi.Controller).
func builderOptions(v2 bool) builder.Options {
	return builder.Options{
		V2:                      v2,
		IncludeSelectableFields: utilfeature.DefaultFeatureGate.Enabled(apiextensionsfeatures.CustomResourceFieldSelectors),
	}
}

// customResource adds the paths and schemas of the custom resource res
// from its CRD. ok is false when the builder cannot describe it (the
// caller then describes it as any other resource, with an object of any
// shape).
func (b *pathsBuilder) customResource(res *registry.Resource) (ok bool) {
	doc, err := builder.BuildOpenAPIV3(res.CRD, res.Version, builderOptions(false))
	if err != nil || doc.Paths == nil || doc.Components == nil {
		return false
	}
	for path, p := range doc.Paths.Paths {
		b.paths[path] = p
		b.built[path] = true
	}
	for name, s := range doc.Components.Schemas {
		if b.defs.Has(name) {
			continue // a meta type: upstream's own, with the others
		}
		b.custom[name] = s
		b.crd[name] = true
	}
	// Every reference out of the builder's paths and custom schemas that
	// is not one of the custom schemas is one of upstream's definitions.
	for _, ref := range schemaRefs(doc.Paths, "#/components/schemas/") {
		b.useOrCustom(ref)
	}
	for name := range doc.Components.Schemas {
		if s := b.custom[name]; s != nil {
			for _, ref := range schemaRefs(s, "#/components/schemas/") {
				b.useOrCustom(ref)
			}
		}
	}
	return true
}

func (b *pathsBuilder) useOrCustom(name string) {
	if _, ok := b.custom[name]; !ok {
		b.use(name)
	}
}

// customV2 is the OpenAPI v2 description of the custom resources crs:
// their paths, the parameters the paths share, their own definitions (defaults pruned, as kube-apiserver
// merges them into its v2 document) and the names of the upstream
// definitions they refer to.
func customV2(crs []*registry.Resource, has func(string) bool) (paths map[string]spec.PathItem, params map[string]spec.Parameter, custom map[string]spec.Schema, roots []string) {
	paths, params, custom = map[string]spec.PathItem{}, map[string]spec.Parameter{}, map[string]spec.Schema{}
	seen := map[string]bool{}
	for _, res := range crs {
		s, err := builder.BuildOpenAPIV2(res.CRD, res.Version, builderOptions(true))
		if err != nil || s.Paths == nil {
			continue // described in the v3 documents' way (customSchema)
		}
		for path, p := range s.Paths.Paths {
			paths[path] = p
		}
		// The builder shares the parameters its operations have in common
		// under #/parameters/, named by content, as kube-apiserver's
		// document has them.
		for name, p := range s.Parameters {
			params[name] = p
		}
		local := map[string]bool{}
		for name, d := range openapihandler.PruneDefaults(s.Definitions) {
			if has(name) {
				continue
			}
			custom[name] = d
			local[name] = true
		}
		refs := schemaRefs(s.Paths, "#/definitions/")
		for name := range local {
			d := custom[name]
			refs = append(refs, schemaRefs(&d, "#/definitions/")...)
		}
		for _, name := range refs {
			if !local[name] && !seen[name] {
				seen[name] = true
				roots = append(roots, name)
			}
		}
	}
	return paths, params, custom, roots
}

// schemaRefs returns the definition names v (a document part) refers to
// with prefix, found through its JSON form.
func schemaRefs(v any, prefix string) []string {
	var out []string
	for _, ref := range jsonRefs(v) {
		if name, ok := strings.CutPrefix(ref, prefix); ok {
			out = append(out, name)
		}
	}
	return out
}
