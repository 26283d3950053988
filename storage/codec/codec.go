// Package codec turns objects into etcd values and back. kgate writes JSON;
// it reads JSON and the protobuf values kube-apiserver writes (the "k8s\x00"
// magic prefix followed by a runtime.Unknown envelope).
package codec

import (
	"bytes"
	"fmt"

	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
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
	// older knows the versions kube-apiserver stores a kind in besides
	// the one kgate serves (CRDs as apiextensions.k8s.io/v1beta1, the
	// more compact form), with their internal versions: what the main
	// scheme cannot decode is decoded with it and converted.
	older      *runtime.Scheme
	olderJSON  *json.Serializer
	olderProto *protobuf.Serializer
}

// New returns a codec for the types known to scheme.
func New(scheme *runtime.Scheme) *Codec {
	older := runtime.NewScheme()
	apiextensionsinstall.Install(older)
	return &Codec{
		scheme:     scheme,
		json:       json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{}),
		proto:      protobuf.NewSerializer(scheme, scheme),
		raw:        protobuf.NewRawSerializer(scheme, scheme),
		older:      older,
		olderJSON:  json.NewSerializerWithOptions(json.DefaultMetaFactory, older, older, json.SerializerOptions{}),
		olderProto: protobuf.NewSerializer(older, older),
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
	if runtime.IsNotRegisteredError(err) {
		return c.decodeOlder(value, into)
	}
	if err != nil {
		return fmt.Errorf("cannot decode stored value: %w", err)
	}
	if out != into {
		// The serializers decode a value of another kind into a new
		// object and leave into empty: that is a value of the wrong kind.
		return fmt.Errorf("cannot decode stored value: a %v is not a %T", gvk, into)
	}
	return nil
}

// decodeOlder decodes a value stored in a version the main scheme does
// not know and converts it into into, another version of the same kind,
// through their internal version, defaulted first: as kube-apiserver's
// storage decoder does.
func (c *Codec) decodeOlder(value []byte, into runtime.Object) error {
	var (
		out runtime.Object
		gvk *schema.GroupVersionKind
		err error
	)
	if IsProtobuf(value) {
		out, gvk, err = c.olderProto.Decode(value, nil, nil)
	} else {
		out, gvk, err = c.olderJSON.Decode(value, nil, nil)
	}
	if err != nil {
		return fmt.Errorf("cannot decode stored value: %w", err)
	}
	kinds, _, err := c.older.ObjectKinds(into)
	if err != nil || kinds[0].GroupKind() != gvk.GroupKind() {
		return fmt.Errorf("cannot decode stored value: a %v is not a %T", gvk, into)
	}
	internal, err := c.older.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return fmt.Errorf("cannot decode stored value: no internal version of %v: %w", gvk, err)
	}
	c.older.Default(out)
	if err := c.older.Convert(out, internal, nil); err != nil {
		return fmt.Errorf("cannot convert stored %v: %w", gvk, err)
	}
	if err := c.older.Convert(internal, into, nil); err != nil {
		return fmt.Errorf("cannot convert stored %v: %w", gvk, err)
	}
	return nil
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
