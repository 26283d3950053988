package cluster

import (
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	f := func(m meta) {
		t.Helper()
		b := m.encode()
		got, err := decodeMeta(b)
		if err != nil || got != m {
			t.Errorf("decode(encode(%+v)) = %+v, %v", m, got, err)
		}
	}
	f(meta{role: RoleGateway, epoch: 1})
	f(meta{role: RoleCacheNode, epoch: 1767225600123456789, readAddr: "10.0.3.7:8443"})
	f(meta{role: RoleCacheNode, readAddr: strings.Repeat("x", 400)})

	if n := len(meta{role: RoleCacheNode, epoch: 1767225600123456789, readAddr: "10.0.3.7:8443"}.encode()); n > 32 {
		t.Errorf("typical metadata is %d bytes", n)
	}
	// Later versions may append fields.
	b := append(meta{role: RoleGateway, epoch: 5}.encode(), 0xff, 0x01)
	b[0] = 2
	if got, err := decodeMeta(b); err != nil || got.role != RoleGateway || got.epoch != 5 {
		t.Errorf("decode of a v2 record = %+v, %v", got, err)
	}
}

func TestDecodeMetaRejects(t *testing.T) {
	for _, b := range [][]byte{nil, {1}, {0, 1, 1, 0}, {1, 1}, {1, 1, 0x80}, {1, 1, 1, 5, 'a'}, {1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if m, err := decodeMeta(b); err == nil {
			t.Errorf("decodeMeta(%v) = %+v, want an error", b, m)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(meta{role: RoleCacheNode, epoch: 42, readAddr: "a:1"}.encode())
	f.Add([]byte{1, 9, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		if len(m.readAddr) > len(b) {
			t.Fatalf("read address longer than the input")
		}
	})
}
