package readapi

import (
	"bytes"
	"io"
	"testing"
)

func TestListBodyReadEqualsWriteTo(t *testing.T) {
	tests := []struct {
		name  string
		items [][]byte
		chunk int
	}{
		{"empty", nil, 7},
		{"one", [][]byte{[]byte("abc")}, 1},
		{"several", [][]byte{[]byte("abc"), {}, bytes.Repeat([]byte("x"), 300)}, 64},
		{"big chunk", [][]byte{[]byte("abc"), []byte("de")}, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mk := func() *listBody {
				b := newListBody()
				b.head = append(b.head, "HEAD"...)
				b.size += 4
				for _, it := range tt.items {
					b.add(it)
				}
				return b
			}
			var want bytes.Buffer
			b := mk()
			if n, err := b.WriteTo(&want); err != nil || n != b.size || int64(want.Len()) != b.size {
				t.Fatalf("WriteTo = %d, %v; size %d", n, err, b.size)
			}
			b.Close()
			b = mk()
			var got []byte
			buf := make([]byte, tt.chunk)
			for {
				n, err := b.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			b.Close()
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("Read gave %q, WriteTo %q", got, want.Bytes())
			}
		})
	}
}
