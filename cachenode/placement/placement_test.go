package placement

import (
	"testing"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/storage/ranges"
)

type fakeMembers struct {
	self  string
	nodes []string
}

func (f *fakeMembers) CacheNodes() []cluster.Member {
	var out []cluster.Member
	for _, n := range f.nodes {
		out = append(out, cluster.Member{Name: n, Role: cluster.RoleCacheNode})
	}
	return out
}
func (f *fakeMembers) LocalName() string        { return f.self }
func (f *fakeMembers) Changes() <-chan struct{} { return nil }

type fakeDirectory map[string][]string // range -> ready nodes

func (f fakeDirectory) Ready(id string) []directory.Replica {
	var out []directory.Replica
	for _, n := range f[id] {
		out = append(out, directory.Replica{Node: n})
	}
	return out
}
func (f fakeDirectory) Changes() <-chan struct{} { return nil }

func TestPlacement(t *testing.T) {
	const rng = "pods"
	nodes := []string{"a", "b", "c"}
	owners := ranges.Owners(rng, nodes, 2) // best first
	var outsider string
	for _, n := range nodes {
		if n != owners[0] && n != owners[1] {
			outsider = n
		}
	}
	dir := fakeDirectory{}
	at := func(self string) *Placement {
		p, err := New(Config{Members: &fakeMembers{self: self, nodes: nodes}, Directory: dir})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first, second, out := at(owners[0]), at(owners[1]), at(outsider)

	// Owners want the range whatever their state; others do not.
	if !first.Wants(rng, false) || !second.Wants(rng, false) || out.Wants(rng, false) {
		t.Fatal("owners must want the range, the outsider must not")
	}
	// Nobody ready: no primary.
	if first.Primary(rng, false) || second.Primary(rng, false) {
		t.Fatal("a primary that is not ready")
	}
	// The second owner is ready first: it publishes until the first is.
	dir[rng] = []string{owners[1]}
	if !second.Primary(rng, true) || first.Primary(rng, false) {
		t.Fatal("the only ready owner must be primary")
	}
	dir[rng] = []string{owners[0], owners[1]}
	if !first.Primary(rng, true) || second.Primary(rng, true) {
		t.Fatal("the first ready owner must be primary")
	}

	// Handoff: the outsider served the range (ready) before the owners
	// joined; it keeps it until both owners are ready.
	dir[rng] = []string{outsider, owners[0]}
	if !out.Wants(rng, true) {
		t.Fatal("the old server let go before every owner was ready")
	}
	if out.Primary(rng, true) {
		t.Fatal("a ready owner exists: the old server must not publish")
	}
	dir[rng] = []string{outsider}
	if !out.Primary(rng, true) {
		t.Fatal("while no owner is ready the old server publishes")
	}
	dir[rng] = []string{outsider, owners[0], owners[1]}
	if out.Wants(rng, true) {
		t.Fatal("every owner is ready: the old server must let go")
	}

	// A node dies: membership drops it and the next node owns the range.
	dead := owners[0]
	var alive []string
	for _, n := range nodes {
		if n != dead {
			alive = append(alive, n)
		}
	}
	after := ranges.Owners(rng, alive, 2)
	p, err := New(Config{Members: &fakeMembers{self: outsider, nodes: alive}, Directory: fakeDirectory{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Owners(rng); len(got) != 2 || got[0] != after[0] || got[1] != after[1] {
		t.Fatalf("owners after a death = %v, want %v", got, after)
	}
	if !p.Wants(rng, false) {
		t.Fatal("with two nodes left, each owns every range at R=2")
	}
}
