package readapi

import (
	"testing"

	"github.com/kgate/kgate/storage/ranges"
)

func TestPrefixMeets(t *testing.T) {
	whole := &ranges.Range{ID: "pods", Start: "/registry/pods/", End: "/registry/pods0"}
	split := &ranges.Range{ID: "pods-3", Start: "/registry/pods/t", End: "/registry/pods0"}
	first := &ranges.Range{ID: "pods-0", Start: "/registry/pods/", End: "/registry/pods/g"}
	f := func(prefix string, r *ranges.Range, want bool) {
		t.Helper()
		if got := prefixMeets(prefix, r); got != want {
			t.Errorf("prefixMeets(%q, %s) = %v, want %v", prefix, r.ID, got, want)
		}
	}
	f("/registry/pods/", whole, true)
	f("/registry/pods/ns/", whole, true)
	f("/registry/pods/z9/", split, true) // a namespace inside a split range
	f("/registry/pods/", split, true)    // cluster-wide over a split range
	f("/registry/pods/a/", split, false)
	f("/registry/pods/g/", first, false) // starts at the range's end
	f("/registry/pods/f/", first, true)
	f("/registry/configmaps/", whole, false)
	f("/registry/", split, true)
}
