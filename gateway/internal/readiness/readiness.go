// Package readiness decides which ranges a gateway must be able to read
// to report ready: those of the table it started with, and a range added
// at run time once it was first served.
package readiness

import (
	"context"
	"sync"

	"github.com/kgate/kgate/storage/ranges"
)

// Ranges is what /readyz asks of the cache nodes: a ready replica for
// each range of the table the gateway started with, and for each range
// added since once it had one. A range added at run time (a new custom
// resource) is not required while its cache nodes first sync it: the
// gateway stays ready, and only the new resource's reads wait (503)
// meanwhile. Serving, unlike readiness, asks for every current range.
type Ranges struct {
	mu sync.Mutex // guards required
	// required are the ranges the gateway must serve to be ready, by
	// their *Range (a range removed and added again is a new one).
	required map[*ranges.Range]bool
}

func New(start *ranges.Table) *Ranges {
	r := &Ranges{required: map[*ranges.Range]bool{}}
	for _, rng := range start.All() {
		r.required[rng] = true
	}
	return r
}

// Check asks ready (the router's Ready) for the required ranges of t. It
// asks first, one by one, for the ranges of t not yet required: those
// ready now are required from now on. Ranges no longer in t are
// forgotten.
func (r *Ranges) Check(ctx context.Context, t *ranges.Table, ready func(context.Context, []string) error) error {
	var need, fresh []*ranges.Range
	r.mu.Lock()
	for _, rng := range t.All() {
		if r.required[rng] {
			need = append(need, rng)
		} else {
			fresh = append(fresh, rng)
		}
	}
	for rng := range r.required {
		if cur, ok := t.ByID(rng.ID); !ok || cur != rng {
			delete(r.required, rng)
		}
	}
	r.mu.Unlock()
	for _, rng := range fresh {
		if ready(ctx, []string{rng.ID}) == nil {
			r.mu.Lock()
			r.required[rng] = true
			r.mu.Unlock()
			need = append(need, rng)
		}
	}
	return ready(ctx, IDs(need))
}

// IDs are the ranges' IDs.
func IDs(rs []*ranges.Range) []string {
	ids := make([]string, len(rs))
	for i, rng := range rs {
		ids[i] = rng.ID
	}
	return ids
}
