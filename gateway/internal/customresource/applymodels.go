package customresource

import (
	"fmt"
	"maps"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	openapispec "k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/gateway/internal/openapi/defs"
)

// metaSchemas are the OpenAPI v3 definitions a custom resource's schema
// refers to (ObjectMeta, ListMeta and what they refer to): the part of
// kube-apiserver's static OpenAPI spec that upstream merges with a CRD's
// spec for its field manager.
var metaSchemas = sync.OnceValues(func() (map[string]*openapispec.Schema, error) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return defs.New(s).V3("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")
})

// applyTypeConverter is the type converter upstream's CRD handler gives a
// CRD's field managers: the structured-merge-diff types of the OpenAPI v3
// spec of every version of crd (apiextensions' builder, merged with the
// static definitions), so that apply merges lists by their list-map keys
// and refuses fields the schema does not declare. As upstream, a CRD whose
// models cannot be built falls back to the type converter deduced from
// the objects.
func applyTypeConverter(crd *apiextensionsv1.CustomResourceDefinition) (managedfields.TypeConverter, error) {
	models, err := applyModels(crd)
	if err != nil || len(models) == 0 {
		return managedfields.NewDeducedTypeConverter(), nil
	}
	return managedfields.NewTypeConverter(models, crd.Spec.PreserveUnknownFields)
}

// applyModels does what upstream's buildOpenAPIModelsForApply does.
func applyModels(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*openapispec.Schema, error) {
	static, err := metaSchemas()
	if err != nil {
		return nil, err
	}
	specs := []*spec3.OpenAPI{{
		Version:    "3.0.0",
		Info:       &openapispec.Info{InfoProps: openapispec.InfoProps{Title: "Kubernetes CRD Swagger", Version: "v0.1.0"}},
		Components: &spec3.Components{Schemas: maps.Clone(static)}, // the merge adds to it
	}}
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return nil, fmt.Errorf("cannot build the OpenAPI models of %s %s: %w", crd.Name, v.Name, err)
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, fmt.Errorf("cannot merge the OpenAPI models of %s: %w", crd.Name, err)
	}
	return merged.Components.Schemas, nil
}
