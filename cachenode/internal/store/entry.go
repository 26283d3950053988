package store

import (
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// ProtobufFunc encodes the served JSON of an object as a bare protobuf
// message. It is called at most once per entry.
type ProtobufFunc func(json []byte) ([]byte, error)

// Entry is one version of one object. It is immutable once made, except
// for its protobuf form, which is computed on first use.
type Entry struct {
	Key         string
	Namespace   string
	Name        string
	ModRevision int64
	Labels      labels.Set
	// Fields holds every field a field selector may use, metadata.name and
	// (when namespaced) metadata.namespace included.
	Fields fields.Set
	// JSON is the object as served: apiVersion and kind of the served
	// kind, metadata.resourceVersion = ModRevision.
	JSON []byte

	toProto  ProtobufFunc
	once     sync.Once
	proto    []byte
	protoErr error
}

// NewEntry makes an entry. toProto computes the protobuf form when first
// asked for; it may be nil when proto is given or protobuf is never served.
// proto, when not nil, is the protobuf form computed already.
func NewEntry(key, namespace, name string, modRevision int64, l labels.Set, f fields.Set, json []byte, proto []byte, toProto ProtobufFunc) *Entry {
	e := &Entry{
		Key: key, Namespace: namespace, Name: name, ModRevision: modRevision,
		Labels: l, Fields: f, JSON: json, toProto: toProto,
	}
	if proto != nil {
		e.proto = proto
		e.once.Do(func() {})
	}
	return e
}

// Protobuf returns the object as a bare protobuf message, computing it
// once. It is safe for concurrent use.
func (e *Entry) Protobuf() ([]byte, error) {
	e.once.Do(func() {
		if e.toProto == nil {
			e.protoErr = errNoProtobuf
			return
		}
		e.proto, e.protoErr = e.toProto(e.JSON)
		e.toProto = nil
	})
	return e.proto, e.protoErr
}

// Size is the memory the entry's bytes take, roughly.
func (e *Entry) Size() int64 {
	return int64(len(e.Key) + len(e.JSON) + len(e.Namespace) + len(e.Name) + entryOverhead)
}

// entryOverhead approximates the struct, label and field maps.
const entryOverhead = 256
