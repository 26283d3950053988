package fieldmanager

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	builderutil "k8s.io/kube-openapi/pkg/builder3/util"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// gvkExtension is the OpenAPI extension that names the kinds of a model;
// the type converter indexes models by it.
const gvkExtension = "x-kubernetes-group-version-kind"

// NewTypeConverter builds the structured-merge-diff type converter of every
// versioned kind of scheme from the models kube-apiserver builds its own
// from: upstream's generated OpenAPI definitions without what disabled
// features add (utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures),
// each model of a kind and every model it refers to, as OpenAPI v3
// components (references wrapped, builderutil.WrapRefs), tagged with the
// kinds of the scheme that use it; then managedfields.NewTypeConverter.
//
// kube-apiserver names and collects the models with k8s.io/apiserver's
// DefinitionNamer and kube-openapi's builder3, which link go-restful
// (deploy/archtest keeps it out of kgate); this does what they do for the
// models alone. It is expensive (hundreds of ms, 20 MB allocated): build
// it once per process.
func NewTypeConverter(scheme *runtime.Scheme) (managedfields.TypeConverter, error) {
	kinds := make(map[string][]schema.GroupVersionKind) // model name → its kinds
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			return nil, fmt.Errorf("cannot name the OpenAPI model of %s: %w", gvk, err)
		}
		kinds[name] = append(kinds[name], gvk)
	}
	defs := utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)(func(name string) spec.Ref {
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(name))
	})
	models := make(map[string]*spec.Schema)
	var add func(name string) error
	add = func(name string) error {
		key := common.EscapeJsonPointer(name)
		if _, ok := models[key]; ok {
			return nil
		}
		def, ok := defs[name]
		if !ok {
			return fmt.Errorf("cannot build the OpenAPI models: no definition of %s", name)
		}
		s := &spec.Schema{SchemaProps: def.Schema.SchemaProps, SwaggerSchemaProps: def.Schema.SwaggerSchemaProps}
		ext := spec.Extensions{}
		for k, v := range def.Schema.Extensions {
			if k != common.ExtensionV2Schema {
				ext[k] = v
			}
		}
		if gvks := kinds[name]; len(gvks) > 0 {
			ext[gvkExtension] = kindsValue(gvks)
		}
		if len(ext) > 0 {
			s.Extensions = ext
		}
		models[key] = builderutil.WrapRefs(s)
		for _, dep := range def.Dependencies {
			if err := add(dep); err != nil {
				return err
			}
		}
		return nil
	}
	for name := range kinds {
		if _, ok := defs[name]; !ok {
			continue // a kind without a model (none of upstream's API types)
		}
		if err := add(name); err != nil {
			return nil, err
		}
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, fmt.Errorf("cannot build the type converter: %w", err)
	}
	return tc, nil
}

// kindsValue is the value of the kinds extension: a sorted list of
// {group, version, kind}.
func kindsValue(gvks []schema.GroupVersionKind) []any {
	slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Kind, b.Kind))
	})
	out := make([]any, 0, len(gvks))
	for _, k := range gvks {
		out = append(out, map[string]any{"group": k.Group, "version": k.Version, "kind": k.Kind})
	}
	return out
}
