package event

import (
	"bytes"
	"testing"
)

func benchEvent() *Event {
	return &Event{
		Type: Modified, Range: "pods", Revision: 123456, PrevRangeRevision: 123450, PrevSubjectRevision: 123400,
		Key: "/registry/pods/default/web-0", Namespace: "default", Name: "web-0",
		Object:     bytes.Repeat([]byte("x"), 4700),
		Labels:     map[string]string{"app": "web", "tier": "frontend"},
		Fields:     map[string]string{"metadata.name": "web-0", "metadata.namespace": "default", "status.phase": "Running"},
		PrevObject: bytes.Repeat([]byte("y"), 4700),
		PrevLabels: map[string]string{"app": "web", "tier": "frontend"},
		PrevFields: map[string]string{"metadata.name": "web-0", "metadata.namespace": "default", "status.phase": "Pending"},
	}
}

func BenchmarkMarshal(b *testing.B) {
	ev := benchEvent()
	buf := make([]byte, 0, ev.Size())
	b.ReportAllocs()
	for b.Loop() {
		buf = ev.AppendMarshal(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkUnmarshal(b *testing.B) {
	data := benchEvent().Marshal()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var e Event
		if err := e.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
}
