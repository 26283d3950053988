package codec_test

import (
	"testing"

	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// TestDecodeOtherVersion: kube-apiserver stores CRDs as
// apiextensions.k8s.io/v1beta1 (the more compact form); such a value,
// protobuf or JSON, decodes into a v1 CRD through the internal version,
// defaulted and converted as kube-apiserver reads it. A value of another
// kind still fails.
func TestDecodeOtherVersion(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := codec.New(scheme)
	old := &v1beta1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1beta1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.example.com", UID: "u1"},
		Spec: v1beta1.CustomResourceDefinitionSpec{
			Group: "example.com", Version: "v1", Scope: v1beta1.NamespaceScoped,
			Names:      v1beta1.CustomResourceDefinitionNames{Plural: "gizmos", Kind: "Gizmo"},
			Validation: &v1beta1.CustomResourceValidation{OpenAPIV3Schema: &v1beta1.JSONSchemaProps{Type: "object"}},
		},
	}
	proto, err := runtime.Encode(protobuf.NewSerializer(scheme, scheme), old)
	if err != nil {
		t.Fatal(err)
	}
	js, err := runtime.Encode(json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{}), old)
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string][]byte{"protobuf": proto, "JSON": js} {
		t.Run(name, func(t *testing.T) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Decode(value, &crd); err != nil {
				t.Fatal(err)
			}
			if crd.Name != "gizmos.example.com" || crd.UID != "u1" || crd.Spec.Group != "example.com" || crd.Spec.Names.Plural != "gizmos" {
				t.Fatalf("decoded %+v", crd)
			}
			if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1" || !crd.Spec.Versions[0].Served || !crd.Spec.Versions[0].Storage ||
				crd.Spec.Versions[0].Schema == nil || crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Type != "object" {
				t.Fatalf("versions not converted from v1beta1: %+v", crd.Spec.Versions)
			}
			if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
				t.Errorf("v1beta1 defaults not applied: conversion %+v", crd.Spec.Conversion)
			}
			var cm corev1.ConfigMap
			if err := c.Decode(value, &cm); err == nil {
				t.Error("a CRD decoded into a ConfigMap")
			}
		})
	}
}
