package ranges

// Rendezvous (highest random weight) hashing assigns each range to the r
// nodes that score highest for it. Every node computes the same answer
// from the same member list, and when a node joins or leaves only the
// ranges it gains or loses move: no other assignment changes.

// Owners returns the r nodes with the highest score for rangeID, best
// first (the first is the range's preferred primary). nodes must be
// distinct; their order does not matter. Fewer than r nodes are all
// returned; r <= 0 or no nodes returns nil.
func Owners(rangeID string, nodes []string, r int) []string {
	if r <= 0 || len(nodes) == 0 {
		return nil
	}
	r = min(r, len(nodes))
	type cand struct {
		score uint64
		node  string
	}
	var buf [8]cand
	top := buf[:0]
	if r > len(buf) {
		top = make([]cand, 0, r)
	}
	for _, n := range nodes {
		c := cand{Score(n, rangeID), n}
		if len(top) == r && !better(c.score, c.node, top[r-1].score, top[r-1].node) {
			continue
		}
		// Insert c into top, kept best first.
		if len(top) < r {
			top = append(top, c)
		} else {
			top[r-1] = c
		}
		for i := len(top) - 1; i > 0 && better(top[i].score, top[i].node, top[i-1].score, top[i-1].node); i-- {
			top[i], top[i-1] = top[i-1], top[i]
		}
	}
	out := make([]string, len(top))
	for i, c := range top {
		out[i] = c.node
	}
	return out
}

// better orders candidates: higher score first, then lower name, so ties
// (practically never) are broken the same way everywhere.
func better(sa uint64, na string, sb uint64, nb string) bool {
	if sa != sb {
		return sa > sb
	}
	return na < nb
}

// Owned returns, in key order, the ranges of t that node is one of the r
// owners of, among nodes.
func (t *Table) Owned(node string, nodes []string, r int) []*Range {
	var out []*Range
	for _, rng := range t.ranges {
		for _, o := range Owners(rng.ID, nodes, r) {
			if o == node {
				out = append(out, rng)
				break
			}
		}
	}
	return out
}

// Score is the rendezvous weight of node for rangeID: FNV-1a 64 over
// node + "\x00" + rangeID, finished with MurmurHash3's 64-bit mixer
// because FNV's last bytes barely reach the high bits that decide the
// comparison. Stable across processes, versions and platforms: never
// change it without moving every range.
func Score(node, rangeID string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(node); i++ {
		h ^= uint64(node[i])
		h *= prime
	}
	h *= prime // the "\x00" separator: xor with 0 is a no-op
	for i := 0; i < len(rangeID); i++ {
		h ^= uint64(rangeID[i])
		h *= prime
	}
	// fmix64
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
