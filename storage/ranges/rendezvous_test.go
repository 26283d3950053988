package ranges

import (
	"fmt"
	"slices"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestOwnersBasics(t *testing.T) {
	nodes := []string{"cachenode-0", "cachenode-1", "cachenode-2", "cachenode-3"}
	got := Owners("pods-1", nodes, 2)
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("Owners = %v", got)
	}
	// Deterministic and independent of input order.
	rev := slices.Clone(nodes)
	slices.Reverse(rev)
	if again := Owners("pods-1", rev, 2); !slices.Equal(again, got) {
		t.Errorf("reversed input: %v, want %v", again, got)
	}
	// Score order, and a prefix of the full ranking.
	all := Owners("pods-1", nodes, 10)
	if len(all) != len(nodes) || !slices.Equal(all[:2], got) {
		t.Errorf("Owners(r=10) = %v, first two should be %v", all, got)
	}
	for i := 1; i < len(all); i++ {
		if Score(all[i-1], "pods-1") < Score(all[i], "pods-1") {
			t.Errorf("not in score order: %v", all)
		}
	}
	if Owners("pods", nil, 2) != nil || Owners("pods", nodes, 0) != nil {
		t.Error("no nodes or r=0 should own nothing")
	}
	// The hash is part of the protocol between processes: pin it.
	if s := Score("cachenode-0", "pods"); s != pinnedScore {
		t.Errorf("Score changed: %d, pinned %d", s, pinnedScore)
	}
}

// pinnedScore is FNV-1a 64 of "cachenode-0\x00pods" through fmix64,
// computed independently.
const pinnedScore uint64 = 9275179105858861023

func TestOwnersBalanced(t *testing.T) {
	nodes := names("cachenode-", 5)
	rangeIDs := names("range-", 1000)
	for _, r := range []int{1, 2} {
		count := map[string]int{}
		for _, id := range rangeIDs {
			for _, n := range Owners(id, nodes, r) {
				count[n]++
			}
		}
		want := len(rangeIDs) * r / len(nodes)
		for _, n := range nodes {
			// Binomial: sd = sqrt(1000*0.2*0.8) ≈ 13 for r=1; allow ±15%.
			if c := count[n]; c < want*85/100 || c > want*115/100 {
				t.Errorf("r=%d: %s owns %d, want %d ±15%%: %v", r, n, c, want, count)
			}
		}
	}
}

func TestOwnersMinimalMovement(t *testing.T) {
	nodes := names("cachenode-", 5)
	rangeIDs := names("range-", 1000)
	const r = 2
	before := map[string][]string{}
	for _, id := range rangeIDs {
		before[id] = Owners(id, nodes, r)
	}

	// A sixth node takes ~1/6 of the assignments, all moving to it.
	grown := append(slices.Clone(nodes), "cachenode-5")
	moved := 0
	for _, id := range rangeIDs {
		after := Owners(id, grown, r)
		for _, n := range after {
			if !slices.Contains(before[id], n) {
				moved++
				if n != "cachenode-5" {
					t.Errorf("%s: %v -> %v: gained an old node", id, before[id], after)
				}
			}
		}
	}
	total := len(rangeIDs) * r
	t.Logf("adding a sixth node moved %d of %d assignments", moved, total)
	if lo, hi := total/6*80/100, total/6*120/100; moved < lo || moved > hi {
		t.Errorf("adding a node moved %d of %d assignments, want ~%d", moved, total, total/6)
	}

	// Removing a node moves only the ranges it owned.
	gone := "cachenode-2"
	shrunk := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == gone })
	for _, id := range rangeIDs {
		after := Owners(id, shrunk, r)
		if !slices.Contains(before[id], gone) {
			if !slices.Equal(after, before[id]) {
				t.Errorf("%s: %v -> %v without owning %s", id, before[id], after, gone)
			}
			continue
		}
		// The surviving owner stays; one replacement is added.
		for _, n := range before[id] {
			if n != gone && !slices.Contains(after, n) {
				t.Errorf("%s: %v -> %v lost surviving owner %s", id, before[id], after, n)
			}
		}
	}
}

func TestOwned(t *testing.T) {
	tbl, err := WithSplits(builtin(t), DefaultSplits())
	if err != nil {
		t.Fatal(err)
	}
	nodes := names("cachenode-", 3)
	const r = 2
	total := 0
	for _, n := range nodes {
		owned := tbl.Owned(n, nodes, r)
		total += len(owned)
		for _, rng := range owned {
			if !slices.Contains(Owners(rng.ID, nodes, r), n) {
				t.Errorf("%s does not own %s", n, rng.ID)
			}
		}
	}
	if total != len(tbl.All())*r {
		t.Errorf("%d assignments, want %d", total, len(tbl.All())*r)
	}
}
