package negotiate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"sigs.k8s.io/yaml"
)

// protoMagic starts every protobuf body kube-apiserver writes.
const protoMagic = "k8s\x00"

// Tags of the runtime.Unknown envelope, a list message and ListMeta.
const (
	tagField1 = 0x0a // field 1, length-delimited
	tagField2 = 0x12 // field 2, length-delimited
	tagField3 = 0x1a // field 3, length-delimited
	tagField4 = 0x22 // field 4, length-delimited
	tagCount  = 0x20 // field 4, varint (ListMeta.remainingItemCount)
)

// ObjectJSON returns the response body of one object from its served JSON:
// the bytes as they are.
func ObjectJSON(obj []byte) []byte { return obj }

// ObjectYAML converts one object's served JSON to the YAML kube-apiserver
// writes.
func ObjectYAML(obj []byte) ([]byte, error) {
	out, err := yaml.JSONToYAML(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot convert object to YAML: %w", err)
	}
	return out, nil
}

// PrettyJSON indents served JSON as kube-apiserver's pretty JSON
// serializer does.
func PrettyJSON(obj []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(obj) + len(obj)/2)
	if err := json.Indent(&buf, bytes.TrimRight(obj, "\n"), "", "  "); err != nil {
		return nil, fmt.Errorf("cannot indent JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// ObjectProtobuf returns the protobuf body of one object from its bare
// protobuf message raw: the "k8s\x00" magic and a runtime.Unknown
// envelope naming apiVersion and kind.
func ObjectProtobuf(apiVersion, kind string, raw []byte) []byte {
	return AppendObjectProtobuf(make([]byte, 0, envelopeSize(apiVersion, kind, len(raw))), apiVersion, kind, raw)
}

// AppendObjectProtobuf appends ObjectProtobuf(apiVersion, kind, raw) to dst.
func AppendObjectProtobuf(dst []byte, apiVersion, kind string, raw []byte) []byte {
	dst = append(dst, protoMagic...)
	return appendUnknown(dst, apiVersion, kind, raw)
}

// envelopeSize is the length of ObjectProtobuf's result.
func envelopeSize(apiVersion, kind string, raw int) int {
	return len(protoMagic) + unknownSize(apiVersion, kind, raw)
}

func typeMetaSize(apiVersion, kind string) int {
	return 1 + protowire.SizeBytes(len(apiVersion)) + 1 + protowire.SizeBytes(len(kind))
}

// unknownSize is the size of runtime.Unknown{TypeMeta, Raw, "", ""}.
func unknownSize(apiVersion, kind string, raw int) int {
	return 1 + protowire.SizeBytes(typeMetaSize(apiVersion, kind)) + 1 + protowire.SizeBytes(raw) + 2 + 2
}

// appendUnknown writes runtime.Unknown as its generated marshaller does:
// typeMeta (1), raw (2), then the always-present empty contentEncoding (3)
// and contentType (4).
func appendUnknown(dst []byte, apiVersion, kind string, raw []byte) []byte {
	dst = append(dst, tagField1)
	dst = protowire.AppendVarint(dst, uint64(typeMetaSize(apiVersion, kind)))
	dst = append(dst, tagField1)
	dst = protowire.AppendString(dst, apiVersion)
	dst = append(dst, tagField2)
	dst = protowire.AppendString(dst, kind)
	dst = append(dst, tagField2)
	dst = protowire.AppendBytes(dst, raw)
	return append(dst, tagField3, 0, tagField4, 0)
}

// List is a list response built from pre-encoded items.
type List struct {
	APIVersion string // "v1", "apps/v1"
	Kind       string // "PodList"

	ResourceVersion    string
	Continue           string
	RemainingItemCount *int64

	// Items are the objects, each as served JSON or as a bare protobuf
	// message, by the encoder used.
	Items [][]byte
	// KeepItemTypeMeta keeps a leading "kind" and "apiVersion" in JSON
	// items. kube-apiserver omits them in lists of built-in types and
	// keeps them for custom resources.
	KeepItemTypeMeta bool
}

// ListJSON returns the JSON body of l.
func ListJSON(l *List) []byte {
	return AppendListJSON(make([]byte, 0, listJSONSize(l)), l)
}

// AppendListJSON appends the JSON body of l to dst, byte-identical to
// kube-apiserver's, trailing newline included.
func AppendListJSON(dst []byte, l *List) []byte {
	dst = append(dst, '{')
	if l.Kind != "" {
		dst = append(dst, `"kind":`...)
		dst = appendJSONString(dst, l.Kind)
		dst = append(dst, ',')
	}
	if l.APIVersion != "" {
		dst = append(dst, `"apiVersion":`...)
		dst = appendJSONString(dst, l.APIVersion)
		dst = append(dst, ',')
	}
	dst = append(dst, `"metadata":{`...)
	comma := false
	if l.ResourceVersion != "" {
		dst = append(dst, `"resourceVersion":`...)
		dst = appendJSONString(dst, l.ResourceVersion)
		comma = true
	}
	if l.Continue != "" {
		if comma {
			dst = append(dst, ',')
		}
		dst = append(dst, `"continue":`...)
		dst = appendJSONString(dst, l.Continue)
		comma = true
	}
	if l.RemainingItemCount != nil {
		if comma {
			dst = append(dst, ',')
		}
		dst = append(dst, `"remainingItemCount":`...)
		dst = strconv.AppendInt(dst, *l.RemainingItemCount, 10)
	}
	dst = append(dst, `},"items":[`...)
	for i, item := range l.Items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendItemJSON(dst, item, l.KeepItemTypeMeta)
	}
	return append(dst, "]}\n"...)
}

// listJSONSize is an upper bound of AppendListJSON's output length.
func listJSONSize(l *List) int {
	n := len(`{"kind":,"apiVersion":,"metadata":{"resourceVersion":,"continue":,"remainingItemCount":-9223372036854775808},"items":[]}` + "\n")
	n += jsonStringSize(l.Kind) + jsonStringSize(l.APIVersion) + jsonStringSize(l.ResourceVersion) + jsonStringSize(l.Continue)
	for _, item := range l.Items {
		n += len(item) + 1
	}
	return n
}

// appendItemJSON appends one JSON item without its trailing newline and,
// unless keep, without a leading "kind" and "apiVersion".
func appendItemJSON(dst, item []byte, keep bool) []byte {
	item = bytes.TrimRight(item, "\n")
	if keep {
		return append(dst, item...)
	}
	if tail, ok := afterTypeMeta(item); ok {
		dst = append(dst, '{')
		return append(dst, tail...)
	}
	return append(dst, item...)
}

// afterTypeMeta returns what follows `{"kind":"K","apiVersion":"V"` and a
// comma in item, for the caller to write after '{'. ok is false when item
// does not start so (or the strings hold escapes).
func afterTypeMeta(item []byte) (tail []byte, ok bool) {
	rest, ok := afterString(item, `{"kind":"`)
	if !ok {
		return nil, false
	}
	if rest, ok = afterString(rest, `,"apiVersion":"`); !ok {
		return nil, false
	}
	switch {
	case len(rest) > 0 && rest[0] == ',':
		return rest[1:], true
	case len(rest) > 0 && rest[0] == '}':
		return rest, true
	}
	return nil, false
}

// afterString returns what follows prefix and a JSON string body without
// escapes closed by '"'.
func afterString(b []byte, prefix string) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return nil, false
	}
	b = b[len(prefix):]
	end := bytes.IndexByte(b, '"')
	if end < 0 || bytes.IndexByte(b[:end], '\\') >= 0 {
		return nil, false
	}
	return b[end+1:], true
}

// ListYAML returns the YAML body of l.
func ListYAML(l *List) ([]byte, error) {
	out, err := yaml.JSONToYAML(ListJSON(l))
	if err != nil {
		return nil, fmt.Errorf("cannot convert list to YAML: %w", err)
	}
	return out, nil
}

// ListProtobuf returns the protobuf body of l.
func ListProtobuf(l *List) []byte {
	return AppendListProtobuf(make([]byte, 0, listProtobufSize(l)), l)
}

// AppendListProtobuf appends the protobuf body of l to dst: the magic and
// a runtime.Unknown whose raw is the list message (ListMeta as field 1,
// each item's bare message as field 2), byte-identical to kube-apiserver's.
func AppendListProtobuf(dst []byte, l *List) []byte {
	msg := listMessageSize(l)
	dst = append(dst, protoMagic...)
	dst = append(dst, tagField1)
	dst = protowire.AppendVarint(dst, uint64(typeMetaSize(l.APIVersion, l.Kind)))
	dst = append(dst, tagField1)
	dst = protowire.AppendString(dst, l.APIVersion)
	dst = append(dst, tagField2)
	dst = protowire.AppendString(dst, l.Kind)
	dst = append(dst, tagField2)
	dst = protowire.AppendVarint(dst, uint64(msg))

	dst = append(dst, tagField1)
	dst = protowire.AppendVarint(dst, uint64(listMetaSize(l)))
	dst = append(dst, tagField1, 0) // selfLink
	dst = append(dst, tagField2)
	dst = protowire.AppendString(dst, l.ResourceVersion)
	dst = append(dst, tagField3)
	dst = protowire.AppendString(dst, l.Continue)
	if l.RemainingItemCount != nil {
		dst = append(dst, tagCount)
		dst = protowire.AppendVarint(dst, uint64(*l.RemainingItemCount))
	}
	for _, item := range l.Items {
		dst = append(dst, tagField2)
		dst = protowire.AppendBytes(dst, item)
	}
	return append(dst, tagField3, 0, tagField4, 0)
}

func listMetaSize(l *List) int {
	n := 2 + 1 + protowire.SizeBytes(len(l.ResourceVersion)) + 1 + protowire.SizeBytes(len(l.Continue))
	if l.RemainingItemCount != nil {
		n += 1 + protowire.SizeVarint(uint64(*l.RemainingItemCount))
	}
	return n
}

func listMessageSize(l *List) int {
	n := 1 + protowire.SizeBytes(listMetaSize(l))
	for _, item := range l.Items {
		n += 1 + protowire.SizeBytes(len(item))
	}
	return n
}

func listProtobufSize(l *List) int {
	return len(protoMagic) + unknownSize(l.APIVersion, l.Kind, listMessageSize(l))
}
