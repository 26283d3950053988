// Package codec turns objects into etcd values and back. kgate writes JSON;
// it reads JSON and the protobuf values kube-apiserver writes (the "k8s\x00"
// magic prefix followed by a runtime.Unknown envelope).
package codec

import (
	"bytes"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// protoMagic starts every protobuf value kube-apiserver writes.
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// Codec encodes and decodes stored values. It is safe for concurrent use.
type Codec struct {
	scheme *runtime.Scheme
	json   *json.Serializer
	proto  *protobuf.Serializer
	raw    *protobuf.RawSerializer
}

// New returns a codec for the types known to scheme.
func New(scheme *runtime.Scheme) *Codec {
	return &Codec{
		scheme: scheme,
		json:   json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{}),
		proto:  protobuf.NewSerializer(scheme, scheme),
		raw:    protobuf.NewRawSerializer(scheme, scheme),
	}
}

// IsProtobuf reports whether value is a protobuf value written by
// kube-apiserver.
func IsProtobuf(value []byte) bool { return bytes.HasPrefix(value, protoMagic) }

// Decode decodes a stored value into into, which must be a pointer to the
// typed object of the stored kind.
func (c *Codec) Decode(value []byte, into runtime.Object) error {
	var out runtime.Object
	var gvk *schema.GroupVersionKind
	var err error
	if IsProtobuf(value) {
		out, gvk, err = c.proto.Decode(value, nil, into)
	} else {
		out, gvk, err = c.json.Decode(value, nil, into)
	}
	if err != nil {
		return fmt.Errorf("cannot decode stored value: %w", err)
	}
	if out != into {
		// The serializers decode a value of another kind or version into
		// a new object and leave into empty. Another version of into's
		// kind is converted through the internal version, as
		// kube-apiserver's storage decoder does (it stores CRDs as
		// apiextensions.k8s.io/v1beta1, for one); any other is the wrong
		// kind.
		if err := c.convert(out, *gvk, into); err != nil {
			return fmt.Errorf("cannot decode stored value: a %v is not a %T: %w", gvk, into, err)
		}
	}
	return nil
}

// convert converts in, of kind gvk, into into, another version of the
// same kind, through their internal version: defaulted first, as a
// decoded value is.
func (c *Codec) convert(in runtime.Object, gvk schema.GroupVersionKind, into runtime.Object) error {
	kinds, _, err := c.scheme.ObjectKinds(into)
	if err != nil {
		return err
	}
	if kinds[0].GroupKind() != gvk.GroupKind() {
		return errors.New("another kind")
	}
	internal, err := c.scheme.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return fmt.Errorf("no internal version to convert through: %w", err)
	}
	c.scheme.Default(in)
	if err := c.scheme.Convert(in, internal, nil); err != nil {
		return err
	}
	return c.scheme.Convert(internal, into, nil)
}

// EncodeJSON encodes obj as kgate stores it: JSON with apiVersion and kind
// set from the scheme.
func (c *Codec) EncodeJSON(obj runtime.Object) ([]byte, error) {
	if err := c.setKind(obj); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := c.json.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("cannot encode object as JSON: %w", err)
	}
	out := buf.Bytes()
	if n := len(out); n > 0 && out[n-1] == '\n' {
		out = out[:n-1]
	}
	return out, nil
}

// EncodeProtobuf encodes obj as kube-apiserver stores it: the "k8s\x00"
// magic and a runtime.Unknown envelope.
func (c *Codec) EncodeProtobuf(obj runtime.Object) ([]byte, error) {
	if err := c.setKind(obj); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := c.proto.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("cannot encode object as protobuf: %w", err)
	}
	return buf.Bytes(), nil
}

// EncodeRawProtobuf encodes obj as a bare protobuf message, without magic
// or envelope: the form embedded as an item of a protobuf list.
func (c *Codec) EncodeRawProtobuf(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	if err := c.raw.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("cannot encode object as raw protobuf: %w", err)
	}
	return buf.Bytes(), nil
}

// Kind returns the group/version/kind of a typed object from the scheme.
func (c *Codec) Kind(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvks, _, err := c.scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("cannot find kind of %T: %w", obj, err)
	}
	return gvks[0], nil
}

func (c *Codec) setKind(obj runtime.Object) error {
	gvk, err := c.Kind(obj)
	if err != nil {
		return err
	}
	if _, err := meta.TypeAccessor(obj); err != nil {
		return fmt.Errorf("cannot set kind of %T: %w", obj, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}
