package fieldmanager

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// NewTypeConverter builds the structured-merge-diff type converter of every
// versioned kind of scheme, as kube-apiserver builds its own: upstream's
// generated OpenAPI definitions without what disabled features add
// (utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures), named by a
// definition namer over scheme (which tags each model with its
// x-kubernetes-group-version-kind), the models of the kinds built with
// builder3.BuildOpenAPIDefinitionsForResources, then
// managedfields.NewTypeConverter. It is expensive (seconds, tens of MB):
// build it once per process.
func NewTypeConverter(scheme *runtime.Scheme) (managedfields.TypeConverter, error) {
	defs := utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
	namer := apiopenapi.NewDefinitionNamer(scheme)
	cfg := &common.OpenAPIV3Config{
		Info:              &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes"}},
		GetDefinitionName: namer.GetDefinitionName,
		GetDefinitions:    defs,
	}
	// Resolve the definitions once, with references named by the namer,
	// as k8s.io/apiserver's DefaultOpenAPIV3Config does.
	cfg.Definitions = defs(func(name string) spec.Ref {
		defName, _ := namer.GetDefinitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
	})
	names := make([]string, 0, 512)
	seen := make(map[string]bool)
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			return nil, fmt.Errorf("cannot name the OpenAPI model of %s: %w", gvk, err)
		}
		if _, ok := cfg.Definitions[name]; !ok || seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	sort.Strings(names)
	models, err := builder3.BuildOpenAPIDefinitionsForResources(cfg, names...)
	if err != nil {
		return nil, fmt.Errorf("cannot build the OpenAPI models: %w", err)
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, fmt.Errorf("cannot build the type converter: %w", err)
	}
	return tc, nil
}
