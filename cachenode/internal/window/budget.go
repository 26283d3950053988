package window

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultBudgetBytes is the default bound on the windows of one node
// together.
const DefaultBudgetBytes = 1 << 30

// Budget bounds the bytes of several windows together (every range of a
// cache node): once they hold more, the oldest events of all of them go
// first, by revision. Revisions are etcd's and shared by every range, so
// the windows stay complete from about the same revision and a busy range
// cannot keep a quiet one's history for itself. Each window keeps its own
// bounds too; a window always keeps its newest event.
type Budget struct {
	max   int64
	total atomic.Int64 // bytes of the registered rings' items
	// evictions counts events dropped to stay within the budget.
	evictions atomic.Int64

	mu    sync.Mutex // guards rings; held while evicting (then ring locks are taken after it)
	rings map[*Ring]struct{}
}

// NewBudget returns a budget of max bytes (> 0).
func NewBudget(max int64) (*Budget, error) {
	if max <= 0 {
		return nil, fmt.Errorf("cannot make window budget: %d bytes", max)
	}
	return &Budget{max: max, rings: map[*Ring]struct{}{}}, nil
}

// Bytes returns the bytes held by the windows under the budget.
func (b *Budget) Bytes() int64 { return b.total.Load() }

// Evictions returns how many events the budget has evicted.
func (b *Budget) Evictions() int64 { return b.evictions.Load() }

func (b *Budget) add(r *Ring) {
	b.mu.Lock()
	b.rings[r] = struct{}{}
	b.mu.Unlock()
}

// remove forgets r; r.mu must not be held.
func (b *Budget) remove(r *Ring) {
	b.mu.Lock()
	delete(b.rings, r)
	b.mu.Unlock()
}

// enforce evicts the oldest events of all rings until the budget holds.
// No ring lock may be held by the caller.
func (b *Budget) enforce() {
	if b.total.Load() <= b.max {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.total.Load() > b.max {
		// The ring with the oldest evictable event, and the next oldest
		// head among the others: the victim gives up events until it
		// passes that one (or the budget holds), so a round costs one
		// scan of the rings, not one per event.
		var victim *Ring
		first, second := int64(-1), int64(-1)
		for r := range b.rings {
			rev, ok := r.oldestEvictable()
			if !ok {
				continue
			}
			switch {
			case victim == nil || rev < first:
				victim, second, first = r, first, rev
			case second < 0 || rev < second:
				second = rev
			}
		}
		if victim == nil {
			return // every window is down to its newest event
		}
		if n := victim.evictUpTo(second, b); n == 0 {
			return
		}
	}
}
