package store

import "testing"

func TestDigest(t *testing.T) {
	entries := func(revs ...int64) []*Entry {
		var out []*Entry
		for i, r := range revs {
			out = append(out, &Entry{Key: string(rune('a' + i)), ModRevision: r})
		}
		return out
	}
	base := Load(entries(1, 2, 3), 3).Snapshot().Digest()
	var want Digest
	for i, r := range []int64{1, 2, 3} {
		want.Add(string(rune('a'+i)), r)
	}
	if base != want || base.Count != 3 {
		t.Fatalf("snapshot digest %+v, digest of the same keys %+v", base, want)
	}
	for name, other := range map[string]Digest{
		"another revision": Load(entries(1, 5, 3), 5).Snapshot().Digest(),
		"a missing key":    Load(entries(1, 2), 3).Snapshot().Digest(),
		"an extra key":     Load(entries(1, 2, 3, 4), 4).Snapshot().Digest(),
	} {
		if other == base {
			t.Errorf("%s: digest %+v equals the original's", name, other)
		}
	}
}
