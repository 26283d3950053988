package negotiate

import (
	"bytes"
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/watch"
)

// AppendWatchJSON appends one JSON watch event to dst:
// {"type":"ADDED","object":<obj>} and a newline, as kube-apiserver frames
// it. obj is compact JSON (a trailing newline is dropped): an object's
// served JSON for ADDED, MODIFIED, DELETED and BOOKMARK, a Status for
// ERROR.
func AppendWatchJSON(dst []byte, t watch.EventType, obj []byte) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, string(t))
	dst = append(dst, `,"object":`...)
	dst = append(dst, bytes.TrimRight(obj, "\n")...)
	return append(dst, "}\n"...)
}

// AppendWatchProtobuf appends one protobuf watch frame to dst for an
// object given as its bare message raw: a 4-byte big-endian length, then
// a metav1.WatchEvent whose object.raw is the enveloped object
// (ObjectProtobuf(apiVersion, kind, raw)).
func AppendWatchProtobuf(dst []byte, t watch.EventType, apiVersion, kind string, raw []byte) []byte {
	obj := envelopeSize(apiVersion, kind, len(raw))
	dst = appendWatchHeader(dst, t, obj)
	return AppendObjectProtobuf(dst, apiVersion, kind, raw)
}

// AppendWatchProtobufObject appends one protobuf watch frame to dst for an
// object already enveloped (ObjectProtobuf, or Codec.Encode with Protobuf
// for the Status of an ERROR event).
func AppendWatchProtobufObject(dst []byte, t watch.EventType, enveloped []byte) []byte {
	dst = appendWatchHeader(dst, t, len(enveloped))
	return append(dst, enveloped...)
}

// appendWatchHeader appends the frame length and the WatchEvent fields up
// to the obj bytes of the object's raw.
func appendWatchHeader(dst []byte, t watch.EventType, obj int) []byte {
	rawExt := 1 + protowire.SizeBytes(obj)
	event := 1 + protowire.SizeBytes(len(t)) + 1 + protowire.SizeBytes(rawExt)
	dst = binary.BigEndian.AppendUint32(dst, uint32(event))
	dst = append(dst, tagField1)
	dst = protowire.AppendString(dst, string(t))
	dst = append(dst, tagField2)
	dst = protowire.AppendVarint(dst, uint64(rawExt))
	dst = append(dst, tagField1)
	return protowire.AppendVarint(dst, uint64(obj))
}
