package readapi

import (
	"io"
	"sync"

	"github.com/kgate/kgate/cachenode/internal/wire"
)

// listBody streams a list answer straight from the stored bytes: the
// header, then each item with its length prefix. fasthttp writes it with
// WriteTo after the handler returns and then calls Close; nothing is
// copied into a response buffer first.
type listBody struct {
	head  []byte
	items [][]byte
	size  int64

	// Read position, for writers that do not use WriteTo.
	seg int // 0: head; 2i+1: prefix of item i; 2i+2: item i
	off int
	pre [10]byte
}

var listBodies = sync.Pool{New: func() any { return new(listBody) }}

func newListBody() *listBody {
	b := listBodies.Get().(*listBody)
	b.head, b.items, b.size, b.seg, b.off = b.head[:0], b.items[:0], 0, 0, 0
	return b
}

// add appends an item.
func (b *listBody) add(item []byte) {
	b.items = append(b.items, item)
	b.size += int64(len(wire.AppendUvarint(b.pre[:0], uint64(len(item))))) + int64(len(item))
}

// SupportsBodyWriteTo tells fasthttp to use WriteTo.
func (b *listBody) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the whole body.
func (b *listBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	m, err := w.Write(b.head)
	n += int64(m)
	if err != nil {
		return n, err
	}
	for _, it := range b.items {
		m, err = w.Write(wire.AppendUvarint(b.pre[:0], uint64(len(it))))
		n += int64(m)
		if err != nil {
			return n, err
		}
		m, err = w.Write(it)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	b.seg = 2*len(b.items) + 1
	return n, nil
}

// segment returns the bytes of segment i, or false past the end.
func (b *listBody) segment(i int) ([]byte, bool) {
	switch {
	case i == 0:
		return b.head, true
	case i > 2*len(b.items):
		return nil, false
	case i%2 == 1:
		return wire.AppendUvarint(b.pre[:0], uint64(len(b.items[i/2]))), true
	default:
		return b.items[i/2-1], true
	}
}

// Read reads the body.
func (b *listBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		seg, ok := b.segment(b.seg)
		if !ok {
			if n == 0 {
				return 0, io.EOF
			}
			break
		}
		c := copy(p[n:], seg[b.off:])
		n += c
		b.off += c
		if b.off == len(seg) {
			b.seg++
			b.off = 0
		}
	}
	return n, nil
}

// Close returns the body to its pool.
func (b *listBody) Close() error {
	clear(b.items) // do not keep entries alive from the pool
	listBodies.Put(b)
	return nil
}
