package event

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The wire form of an Event is a protobuf message (so it can be described
// by a .proto file and read by other languages), written by hand:
//
//	message Event {
//	  uint32 type = 1;  string range = 2;  int64 revision = 3;
//	  int64 prev_range_revision = 4;  int64 prev_subject_revision = 5;
//	  string key = 6;  string namespace = 7;  string name = 8;
//	  bytes object = 9;  map<string,string> labels = 10;  map<string,string> fields = 11;
//	  bytes prev_object = 12;  map<string,string> prev_labels = 13;  map<string,string> prev_fields = 14;
//	  uint32 index = 15;  uint32 count = 16;
//	}
//
// Unknown fields are skipped, so fields can be added later.
const (
	fType                protowire.Number = 1
	fRange               protowire.Number = 2
	fRevision            protowire.Number = 3
	fPrevRangeRevision   protowire.Number = 4
	fPrevSubjectRevision protowire.Number = 5
	fKey                 protowire.Number = 6
	fNamespace           protowire.Number = 7
	fName                protowire.Number = 8
	fObject              protowire.Number = 9
	fLabels              protowire.Number = 10
	fFields              protowire.Number = 11
	fPrevObject          protowire.Number = 12
	fPrevLabels          protowire.Number = 13
	fPrevFields          protowire.Number = 14
	fIndex               protowire.Number = 15
	fCount               protowire.Number = 16
)

// ErrMalformed is returned by Unmarshal for bytes that are not an Event.
var ErrMalformed = errors.New("event: malformed")

// Size returns the length of the wire form of e.
func (e *Event) Size() int {
	n := sizeVarint(fType, uint64(e.Type))
	n += sizeString(fRange, e.Range)
	n += sizeVarint(fRevision, uint64(e.Revision))
	n += sizeVarint(fPrevRangeRevision, uint64(e.PrevRangeRevision))
	n += sizeVarint(fPrevSubjectRevision, uint64(e.PrevSubjectRevision))
	n += sizeString(fKey, e.Key)
	n += sizeString(fNamespace, e.Namespace)
	n += sizeString(fName, e.Name)
	n += sizeBytes(fObject, e.Object)
	n += sizeMap(fLabels, e.Labels)
	n += sizeMap(fFields, e.Fields)
	n += sizeBytes(fPrevObject, e.PrevObject)
	n += sizeMap(fPrevLabels, e.PrevLabels)
	n += sizeMap(fPrevFields, e.PrevFields)
	n += sizeVarint(fIndex, uint64(e.Index))
	n += sizeVarint(fCount, uint64(e.Count))
	return n
}

// Marshal returns the wire form of e.
func (e *Event) Marshal() []byte {
	return e.AppendMarshal(make([]byte, 0, e.Size()))
}

// AppendMarshal appends the wire form of e to b.
func (e *Event) AppendMarshal(b []byte) []byte {
	b = appendVarint(b, fType, uint64(e.Type))
	b = appendString(b, fRange, e.Range)
	b = appendVarint(b, fRevision, uint64(e.Revision))
	b = appendVarint(b, fPrevRangeRevision, uint64(e.PrevRangeRevision))
	b = appendVarint(b, fPrevSubjectRevision, uint64(e.PrevSubjectRevision))
	b = appendString(b, fKey, e.Key)
	b = appendString(b, fNamespace, e.Namespace)
	b = appendString(b, fName, e.Name)
	b = appendBytes(b, fObject, e.Object)
	b = appendMap(b, fLabels, e.Labels)
	b = appendMap(b, fFields, e.Fields)
	b = appendBytes(b, fPrevObject, e.PrevObject)
	b = appendMap(b, fPrevLabels, e.PrevLabels)
	b = appendMap(b, fPrevFields, e.PrevFields)
	b = appendVarint(b, fIndex, uint64(e.Index))
	b = appendVarint(b, fCount, uint64(e.Count))
	return b
}

// Unmarshal replaces e with the event encoded in data. Object and
// PrevObject alias data (no copy): data must not be modified while e is
// in use.
func (e *Event) Unmarshal(data []byte) error {
	*e = Event{}
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		data = data[n:]
		var (
			v   uint64
			buf []byte
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(data)
		case protowire.BytesType:
			buf, n = protowire.ConsumeBytes(data)
		default:
			n = protowire.ConsumeFieldValue(num, typ, data)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
		}
		data = data[n:]
		if !wantType(num, typ) {
			continue // unknown field, or known field of another type: skip
		}
		var err error
		switch num {
		case fType:
			if v == 0 || v > uint64(Progress) {
				return fmt.Errorf("%w: unknown type %d", ErrMalformed, v)
			}
			e.Type = Type(v)
		case fRange:
			e.Range = string(buf)
		case fRevision:
			e.Revision = int64(v)
		case fPrevRangeRevision:
			e.PrevRangeRevision = int64(v)
		case fPrevSubjectRevision:
			e.PrevSubjectRevision = int64(v)
		case fIndex:
			e.Index = uint32(v)
		case fCount:
			e.Count = uint32(v)
		case fKey:
			e.Key = string(buf)
		case fNamespace:
			e.Namespace = string(buf)
		case fName:
			e.Name = string(buf)
		case fObject:
			e.Object = buf[:len(buf):len(buf)]
		case fPrevObject:
			e.PrevObject = buf[:len(buf):len(buf)]
		case fLabels:
			e.Labels, err = consumeMapEntry(e.Labels, buf)
		case fFields:
			e.Fields, err = consumeMapEntry(e.Fields, buf)
		case fPrevLabels:
			e.PrevLabels, err = consumeMapEntry(e.PrevLabels, buf)
		case fPrevFields:
			e.PrevFields, err = consumeMapEntry(e.PrevFields, buf)
		}
		if err != nil {
			return err
		}
	}
	if e.Type == 0 {
		return fmt.Errorf("%w: no type", ErrMalformed)
	}
	return nil
}

// wantType reports whether num is a known field with wire type typ.
func wantType(num protowire.Number, typ protowire.Type) bool {
	switch num {
	case fType, fRevision, fPrevRangeRevision, fPrevSubjectRevision, fIndex, fCount:
		return typ == protowire.VarintType
	case fRange, fKey, fNamespace, fName, fObject, fLabels, fFields, fPrevObject, fPrevLabels, fPrevFields:
		return typ == protowire.BytesType
	}
	return false
}

func consumeMapEntry(m map[string]string, b []byte) (map[string]string, error) {
	var k, v string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return m, fmt.Errorf("%w: map entry: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return m, fmt.Errorf("%w: map entry: %v", ErrMalformed, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		s, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return m, fmt.Errorf("%w: map entry: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1:
			k = string(s)
		case 2:
			v = string(s)
		}
	}
	if m == nil {
		m = make(map[string]string, 4)
	}
	m[k] = v
	return m, nil
}

// Fields at their zero value are omitted, as protobuf 3 does.

func sizeVarint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func sizeBytes(num protowire.Number, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(b))
}

func mapEntrySize(k, v string) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
}

func sizeMap(num protowire.Number, m map[string]string) int {
	n := 0
	for k, v := range m {
		n += protowire.SizeTag(num) + protowire.SizeBytes(mapEntrySize(k, v))
	}
	return n
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendMap(b []byte, num protowire.Number, m map[string]string) []byte {
	for k, v := range m {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(mapEntrySize(k, v)))
		// Keys and values are always written, even when empty, so an
		// entry with an empty value survives the round trip.
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	return b
}
