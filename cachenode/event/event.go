// Package event is the wire format of the changes a cache node publishes
// on NATS and serves from its window: gateways read it, the cache node owns
// it.
package event

import "strings"

// Type of an event.
type Type uint8

const (
	// Added: the object was created at Revision.
	Added Type = iota + 1
	// Modified: the object was updated at Revision.
	Modified
	// Deleted: the object was deleted at Revision; Object is its last state
	// with metadata.resourceVersion set to Revision.
	Deleted
	// Progress: nothing happened on the range between PrevRangeRevision
	// and Revision. Carries no object.
	Progress
)

// String returns the Kubernetes watch event type name.
func (t Type) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	case Progress:
		return "PROGRESS"
	}
	return "UNKNOWN"
}

// Event is one change on a range, in the order etcd made it.
type Event struct {
	Type  Type
	Range string // range id
	// Revision is the etcd revision of the change (for Progress: the
	// revision the range has seen up to).
	Revision int64
	// PrevRangeRevision is the revision of the previous event on the same
	// range (0 when unknown: the first event after a reflector start).
	PrevRangeRevision int64
	// PrevSubjectRevision is the revision of the previous event published
	// on the same subject (range and namespace); 0 when unknown.
	PrevSubjectRevision int64

	// Index and Count place the event among the Count events of the range
	// at the same Revision (one etcd transaction may change several keys):
	// Index runs from 0 to Count-1. An event is identified by (Revision,
	// Index); the previous event of (R, i>0) is (R, i-1), that of (R, 0)
	// is the last event at PrevRangeRevision. Count 0 means 1.
	Index uint32
	Count uint32

	Key       string
	Namespace string
	Name      string

	// Object is the object's JSON with metadata.resourceVersion = Revision.
	Object []byte
	Labels map[string]string
	Fields map[string]string // field selector values, metadata.* included

	// PrevObject is the object's JSON before a Modified or Deleted change,
	// with its own resourceVersion; nil for Added.
	PrevObject []byte
	PrevLabels map[string]string
	PrevFields map[string]string
}

// Last reports whether e is the last event of its revision on the range.
func (e *Event) Last() bool { return e.Count == 0 || e.Index+1 >= e.Count }

// SubjectPrefix starts every subject kgate publishes events on.
const SubjectPrefix = "kgate.ev"

// NoNamespace stands for the empty namespace of cluster-scoped objects in
// a subject.
const NoNamespace = "_"

// Subject is the NATS subject of events on range rangeID in namespace ns
// (empty for cluster-scoped objects). Range ids and namespaces contain no
// dots, so no escaping is needed.
func Subject(rangeID, ns string) string {
	if ns == "" {
		ns = NoNamespace
	}
	return SubjectPrefix + "." + rangeID + "." + ns
}

// RangeSubjects is the subject pattern matching every namespace of a range.
func RangeSubjects(rangeID string) string {
	return SubjectPrefix + "." + rangeID + ".*"
}

// ProgressSubject carries Progress events of a range: the range is idle up
// to the revision given.
func ProgressSubject(rangeID string) string {
	return ProgressSubjectPrefix + "." + rangeID
}

// ProgressSubjectPrefix starts every progress subject.
const ProgressSubjectPrefix = "kgate.progress"

// NamespaceOf returns the namespace token of a subject made by Subject.
func NamespaceOf(subject string) string {
	i := strings.LastIndexByte(subject, '.')
	ns := subject[i+1:]
	if ns == NoNamespace {
		return ""
	}
	return ns
}
