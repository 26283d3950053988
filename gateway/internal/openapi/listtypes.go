package openapi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/applyconfigurations"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// listTypes answers which merge semantics (x-kubernetes-list-type,
// x-kubernetes-list-map-keys, x-kubernetes-map-type) a field of a built-in
// type has. Go struct tags do not carry them; the structured-merge-diff
// schema client-go ships for server-side apply (generated from the same
// +listType/+mapType markers as kube-apiserver's OpenAPI) does.
type listTypes struct {
	schema *smdschema.Schema
}

// newListTypes extracts the built-in types' structured-merge-diff schema
// from client-go's type converter.
func newListTypes(scheme *runtime.Scheme) (*listTypes, error) {
	tc := applyconfigurations.NewTypeConverter(scheme)
	probe := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
	tv, err := tc.ObjectToTyped(probe)
	if err != nil {
		return nil, fmt.Errorf("cannot load the built-in types' merge schema: %w", err)
	}
	return &listTypes{schema: tv.Schema()}, nil
}

// field returns the merge extensions of field of the definition owner
// (a model name such as "io.k8s.api.core.v1.PodSpec"), or nil.
func (l *listTypes) field(owner, field string) map[string]any {
	def, ok := l.schema.FindNamedType(owner)
	if !ok || def.Map == nil {
		return nil
	}
	for _, f := range def.Map.Fields {
		if f.Name != field {
			continue
		}
		atom, ok := l.schema.Resolve(f.Type)
		if !ok {
			return nil
		}
		switch {
		case atom.List != nil:
			switch atom.List.ElementRelationship {
			case smdschema.Associative:
				if len(atom.List.Keys) > 0 {
					return map[string]any{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": atom.List.Keys}
				}
				return map[string]any{"x-kubernetes-list-type": "set"}
			case smdschema.Atomic:
				return map[string]any{"x-kubernetes-list-type": "atomic"}
			}
		case atom.Map != nil && f.Type.NamedType == nil && atom.Map.ElementRelationship == smdschema.Atomic:
			return map[string]any{"x-kubernetes-map-type": "atomic"}
		}
		return nil
	}
	return nil
}

// atomicStruct reports whether the definition name is a struct merged as a
// whole (+structType=atomic, published as x-kubernetes-map-type: atomic).
func (l *listTypes) atomicStruct(name string) bool {
	def, ok := l.schema.FindNamedType(name)
	return ok && def.Map != nil && def.Map.ElementRelationship == smdschema.Atomic
}
