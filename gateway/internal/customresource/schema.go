package customresource

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
)

// version is the semantics of one served version of a CRD, built as
// apiextensions-apiserver's crdHandler builds them for its REST storage
// (customresource_handler.go getOrCreateServingInfoFor).
type version struct {
	gvk                   schema.GroupVersionKind
	structural            *structuralschema.Structural // nil without a schema
	preserveUnknownFields bool
	hasDefaults           bool // the structural schema sets defaults
	main                  strategy
	status                strategy                                              // nil without a status subresource
	scale                 *apiextensionsinternal.CustomResourceSubresourceScale // nil without a scale subresource
}

// strategy is what a write needs of upstream's custom resource strategy.
type strategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// newVersion builds the semantics of crd's version name.
func newVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) (*version, error) {
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil {
		return nil, fmt.Errorf("cannot serve %s: no version %s", crd.Name, name)
	}
	kind := schema.GroupVersionKind{Group: crd.Spec.Group, Version: name, Kind: crd.Status.AcceptedNames.Kind}
	out := &version{gvk: kind, preserveUnknownFields: crd.Spec.PreserveUnknownFields}

	validation, err := apihelpers.GetSchemaForVersion(crd, name)
	if err != nil {
		return nil, fmt.Errorf("cannot read the schema of %s %s: %w", crd.Name, name, err)
	}
	var internal *apiextensionsinternal.CustomResourceValidation
	var props *apiextensionsinternal.JSONSchemaProps
	if validation != nil {
		internal = &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
			return nil, fmt.Errorf("cannot convert the schema of %s %s: %w", crd.Name, name, err)
		}
		props = internal.OpenAPIV3Schema
		s, err := structuralschema.NewStructural(props)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			return nil, fmt.Errorf("cannot serve %s %s: the schema is not structural: %w", crd.Name, name, err)
		}
		if err == nil && !crd.Spec.PreserveUnknownFields {
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return nil, fmt.Errorf("cannot prune the defaults of %s %s: %w", crd.Name, name, err)
			}
		}
		out.structural = s
		out.hasDefaults = hasDefaults(s)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, fmt.Errorf("cannot make the schema validator of %s %s: %w", crd.Name, name, err)
	}
	subresources, err := apihelpers.GetSubresourcesForVersion(crd, name)
	if err != nil {
		return nil, fmt.Errorf("cannot read the subresources of %s %s: %w", crd.Name, name, err)
	}
	var statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scaleSpec *apiextensionsinternal.CustomResourceSubresourceScale
	if subresources != nil && subresources.Status != nil {
		statusSpec = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(subresources.Status, statusSpec, nil); err != nil {
			return nil, fmt.Errorf("cannot convert the status subresource of %s %s: %w", crd.Name, name, err)
		}
		if props != nil && props.Properties != nil {
			if statusSchema, ok := props.Properties["status"]; ok {
				if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&statusSchema); err != nil {
					return nil, fmt.Errorf("cannot make the status validator of %s %s: %w", crd.Name, name, err)
				}
			}
		}
	}
	if subresources != nil && subresources.Scale != nil {
		scaleSpec = &apiextensionsinternal.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subresources.Scale, scaleSpec, nil); err != nil {
			return nil, fmt.Errorf("cannot convert the scale subresource of %s %s: %w", crd.Name, name, err)
		}
	}
	main := customresource.NewStrategy(crdserverscheme.NewUnstructuredObjectTyper(), crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		kind, validator, statusValidator, out.structural, statusSpec, scaleSpec, v.SelectableFields)
	out.main = main
	out.scale = scaleSpec
	if statusSpec != nil {
		out.status = customresource.NewStatusStrategy(main)
	}
	return out, nil
}

// coerce does to an object decoded from a request or from etcd what
// upstream's decoder does to custom resources (unstructuredSchemaCoercer
// then unstructuredDefaulter): metadata coerced to ObjectMeta, unknown
// fields pruned (unless the CRD preserves them), nulls of non-nullable
// fields without default dropped, then defaults applied.
func (v *version) coerce(u *unstructured.Unstructured) error {
	if _, err := v.prune(u, false); err != nil {
		return err
	}
	v.defaults(u)
	return nil
}

// prune is upstream's unstructuredSchemaCoercer.apply: it returns the
// paths of the fields it dropped when track is set (the unknown fields
// fieldValidation reports).
func (v *version) prune(u *unstructured.Unstructured, track bool) ([]string, error) {
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	objectMeta, foundMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: track})
	if err != nil {
		return nil, err
	}
	if v.structural != nil && !v.preserveUnknownFields {
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: track})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, v.structural)
	}
	// CoerceWithOptions returns a *field.Error: kept out of err, where a
	// nil one would not be nil.
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, v.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: track})
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, paths...)
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if foundMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// defaults applies the schema's defaults, as upstream's decoder does to
// objects decoded from a request and read from etcd (here: the stored
// object an update starts from).
func (v *version) defaults(u *unstructured.Unstructured) {
	if v.structural != nil {
		structuraldefaulting.Default(u.Object, v.structural)
	}
}
