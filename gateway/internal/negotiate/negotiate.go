// Package negotiate does content negotiation and encoding as kube-apiserver
// does them: it picks the response format from Accept (JSON, YAML,
// protobuf; as=Table and as=PartialObjectMetadata; stream=watch), reads
// request bodies by Content-Type with strict or lenient field validation,
// and builds responses — single objects, lists and watch frames — from
// pre-encoded object bytes, byte-identical to what apimachinery's
// serializers write.
package negotiate

import "strings"

// Media types kube-apiserver serves.
const (
	MediaJSON     = "application/json"
	MediaYAML     = "application/yaml"
	MediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// Format is a wire format.
type Format uint8

// Formats, in kube-apiserver's order of preference.
const (
	JSON Format = iota
	YAML
	Protobuf
)

// MediaType returns the format's media type.
func (f Format) MediaType() string {
	switch f {
	case YAML:
		return MediaYAML
	case Protobuf:
		return MediaProtobuf
	}
	return MediaJSON
}

func (f Format) String() string { return f.MediaType() }

// subtype is the media subtype: "json", "yaml", "vnd.kubernetes.protobuf".
func (f Format) subtype() string {
	_, sub, _ := strings.Cut(f.MediaType(), "/")
	return sub
}

// streams reports whether the format has a watch stream form.
func (f Format) streams() bool { return f != YAML }

// As is the form a client asks the response to be converted to.
type As uint8

// Conversions a resource endpoint serves (all in group meta.k8s.io).
const (
	AsObject As = iota // no conversion
	AsTable
	AsPartialObjectMetadata
	AsPartialObjectMetadataList
)

func (a As) String() string {
	switch a {
	case AsTable:
		return "Table"
	case AsPartialObjectMetadata:
		return "PartialObjectMetadata"
	case AsPartialObjectMetadataList:
		return "PartialObjectMetadataList"
	}
	return ""
}

// Endpoint says what an endpoint can serve.
type Endpoint struct {
	// Resource is true for resource endpoints (get, list, watch, create,
	// ...): as=Table, as=PartialObjectMetadata[List] and sv=v1 are
	// served there and nowhere else.
	Resource bool
	// Protobuf is true when the served type has a protobuf encoding
	// (built-in types); custom resources get protobuf only as
	// PartialObjectMetadata.
	Protobuf bool
	// Watch is true for watch requests: only formats with a stream form
	// (JSON, protobuf) are served.
	Watch bool
}

// Media is the negotiated form of a response.
type Media struct {
	Format Format
	As     As
	// AsVersion is the meta.k8s.io version of As: "v1" or "v1beta1".
	AsVersion string
	// Pretty asks for indented JSON (Accept parameter pretty=1). The
	// caller also sets it when PrettyHint says so; it means nothing for
	// YAML, protobuf and watch streams.
	Pretty bool
	// Profile is the Accept parameter "profile" (discovery).
	Profile string
	// Stream is set for watch responses.
	Stream bool
}

// ContentType is the Content-Type header kube-apiserver sends with a
// response in this form (conversions do not show in it).
func (m Media) ContentType() string {
	if m.Stream && m.Format == Protobuf {
		return MediaProtobuf + ";stream=watch"
	}
	return m.Format.MediaType()
}
