package discovery

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// format is one of the wire formats discovery is served in.
type format int

const (
	formatJSON format = iota
	formatYAML
	formatProtobuf
	numFormats
)

// mediaType returns the Content-Type of a plain (not aggregated) response.
func (f format) mediaType() string {
	switch f {
	case formatYAML:
		return runtime.ContentTypeYAML
	case formatProtobuf:
		return runtime.ContentTypeProtobuf
	default:
		return runtime.ContentTypeJSON
	}
}

// encoded is one document in every format, ready to send.
type encoded [numFormats][]byte

// encoders encodes objects as they are, with the TypeMeta the caller set:
// no scheme is involved, so discovery controls exactly which apiVersion
// and kind appear in each document, as kube-apiserver does.
type encoders struct {
	json, yaml, protobuf runtime.Encoder
}

func newEncoders() *encoders {
	return &encoders{
		json:     json.NewSerializerWithOptions(json.DefaultMetaFactory, nil, nil, json.SerializerOptions{}),
		yaml:     json.NewSerializerWithOptions(json.DefaultMetaFactory, nil, nil, json.SerializerOptions{Yaml: true}),
		protobuf: protobuf.NewSerializer(nil, nil),
	}
}

// encode renders obj in every format.
func (e *encoders) encode(obj runtime.Object) (encoded, error) {
	var out encoded
	for f, enc := range [numFormats]runtime.Encoder{formatJSON: e.json, formatYAML: e.yaml, formatProtobuf: e.protobuf} {
		var buf bytes.Buffer
		if err := enc.Encode(obj, &buf); err != nil {
			return out, fmt.Errorf("cannot encode %T as %s: %w", obj, format(f).mediaType(), err)
		}
		out[f] = buf.Bytes()
	}
	return out, nil
}
