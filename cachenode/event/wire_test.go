package event

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
	}{
		{"progress", Event{Type: Progress, Range: "pods", Revision: 42, PrevRangeRevision: 40}},
		{"second of a transaction", Event{Type: Added, Range: "pods", Revision: 42, PrevRangeRevision: 42, Index: 1, Count: 3, Key: "k"}},
		{"added", Event{
			Type: Added, Range: "pods", Revision: 7, PrevRangeRevision: 5, PrevSubjectRevision: 3,
			Key: "/registry/pods/ns/a", Namespace: "ns", Name: "a",
			Object: []byte(`{"kind":"Pod"}`),
			Labels: map[string]string{"app": "x", "empty": ""},
			Fields: map[string]string{"metadata.name": "a", "metadata.namespace": "ns"},
		}},
		{"deleted", Event{
			Type: Deleted, Range: "nodes", Revision: 1 << 40, Key: "/registry/minions/n", Name: "n",
			Object: []byte("obj"), PrevObject: []byte("prev"),
			PrevLabels: map[string]string{"a": "b"}, PrevFields: map[string]string{"spec.unschedulable": "false"},
		}},
		{"negative revisions survive", Event{Type: Modified, Revision: -1, PrevRangeRevision: -2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.ev.Marshal()
			if len(b) != tt.ev.Size() {
				t.Fatalf("len(Marshal) = %d, Size = %d", len(b), tt.ev.Size())
			}
			var got Event
			if err := got.Unmarshal(b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.ev) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tt.ev)
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"no type", protowire.AppendString(protowire.AppendTag(nil, fRange, protowire.BytesType), "x")},
		{"bad type", protowire.AppendVarint(protowire.AppendTag(nil, fType, protowire.VarintType), 9)},
		{"truncated tag", []byte{0x80}},
		{"truncated bytes", append(protowire.AppendTag(nil, fObject, protowire.BytesType), 10, 'a')},
		{"bad map entry", append(protowire.AppendTag(nil, fLabels, protowire.BytesType), 2, 0x0a, 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Event
			if err := e.Unmarshal(tt.data); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unmarshal = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestUnmarshalSkipsUnknownFields(t *testing.T) {
	ev := Event{Type: Added, Revision: 3, Key: "k"}
	b := ev.Marshal()
	b = protowire.AppendTag(b, 99, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 1)
	b = protowire.AppendTag(b, 100, protowire.BytesType)
	b = protowire.AppendString(b, "future")
	b = protowire.AppendTag(b, fKey, protowire.VarintType) // known field, wrong wire type
	b = protowire.AppendVarint(b, 1)
	var got Event
	if err := got.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("got %+v, want %+v", got, ev)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add((&Event{Type: Added, Range: "r", Revision: 1, Key: "k", Object: []byte("{}"), Labels: map[string]string{"a": "b"}}).Marshal())
	f.Add((&Event{Type: Progress, Revision: 9}).Marshal())
	f.Add([]byte{0x08, 0x01, 0x52, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Event
		if err := e.Unmarshal(data); err != nil {
			return
		}
		again := e.Marshal()
		var e2 Event
		if err := e2.Unmarshal(again); err != nil {
			t.Fatalf("re-unmarshal: %v", err)
		}
		if !bytes.Equal(e.Object, e2.Object) || e.Key != e2.Key || e.Revision != e2.Revision ||
			len(e.Labels) != len(e2.Labels) || len(e.PrevFields) != len(e2.PrevFields) {
			t.Fatalf("round trip differs: %+v vs %+v", e, e2)
		}
	})
}
