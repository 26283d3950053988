package store

import (
	"encoding/binary"
	"hash/fnv"
)

// Digest sums a range's keys and their mod revisions in key order, as
// kube-apiserver's cache consistency checker digests a list: two states
// with the same keys at the same revisions have equal digests.
type Digest struct {
	Count int
	Sum   uint64
}

// Add adds the next key (keys must come in ascending order).
func (d *Digest) Add(key string, modRevision int64) {
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], d.Sum)
	h.Write(b[:])
	h.Write([]byte(key))
	binary.BigEndian.PutUint64(b[:], uint64(modRevision))
	h.Write(b[:])
	d.Sum = h.Sum64()
	d.Count++
}

// Digest is the digest of the snapshot's keys and mod revisions.
func (s *Snapshot) Digest() Digest {
	var d Digest
	s.t.tree.Ascend(func(it item) bool {
		d.Add(it.e.Key, it.e.ModRevision)
		return true
	})
	return d
}
