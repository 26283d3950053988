package window

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a node's budget: its windows hold at most a tenth of what
// the node's stores hold, never less than 64 MiB, never more than 1 GiB.
const (
	DefaultBudgetBytes    = 1 << 30
	DefaultBudgetMinBytes = 64 << 20
	DefaultBudgetShare    = 0.1
)

// BudgetConfig bounds the windows of a node together: they may hold
// Share of the bytes their stores hold, but at least Min and at most
// Max bytes. Share 0 bounds them by Max alone.
type BudgetConfig struct {
	Max, Min int64
	Share    float64
}

// Budget bounds the bytes of several windows together (every range of a
// cache node): once they hold more, the oldest events of all of them go
// first, by revision. Revisions are etcd's and shared by every range, so
// the windows stay complete from about the same revision and a busy range
// cannot keep a quiet one's history for itself. Each window keeps its own
// bounds too; a window always keeps its newest event.
//
// The bound follows the stores (BudgetConfig.Share): a cache node's
// memory is then its objects and a share more, whatever their number.
type Budget struct {
	cfg   BudgetConfig
	total atomic.Int64 // bytes of the registered rings' items
	base  atomic.Int64 // bytes of the registered rings' stores (SetBase)
	// evictions counts events dropped to stay within the budget.
	evictions atomic.Int64
	// evictedAge is how old (ns) the last event dropped for the budget
	// was: how far back the windows reach under it.
	evictedAge atomic.Int64

	mu    sync.Mutex // guards rings; held while evicting (then ring locks are taken after it)
	rings map[*Ring]struct{}
}

// NewBudget returns a budget; Max must be > 0, Min and Share >= 0.
func NewBudget(cfg BudgetConfig) (*Budget, error) {
	if cfg.Max <= 0 || cfg.Min < 0 || cfg.Share < 0 || math.IsNaN(cfg.Share) || math.IsInf(cfg.Share, 0) {
		return nil, fmt.Errorf("cannot make window budget: max %d, min %d bytes, share %v", cfg.Max, cfg.Min, cfg.Share)
	}
	cfg.Min = min(cfg.Min, cfg.Max)
	return &Budget{cfg: cfg, rings: map[*Ring]struct{}{}}, nil
}

// Limit returns the bytes the windows may hold now.
func (b *Budget) Limit() int64 {
	if b.cfg.Share == 0 {
		return b.cfg.Max
	}
	share := int64(b.cfg.Share * float64(b.base.Load()))
	return min(b.cfg.Max, max(b.cfg.Min, share))
}

// Bytes returns the bytes held by the windows under the budget.
func (b *Budget) Bytes() int64 { return b.total.Load() }

// Evictions returns how many events the budget has evicted.
func (b *Budget) Evictions() int64 { return b.evictions.Load() }

// EvictedAge returns how old the last event the budget evicted was when
// it went (0 before the first): a budget evicting young events leaves
// watchers little time to resume.
func (b *Budget) EvictedAge() time.Duration { return time.Duration(b.evictedAge.Load()) }

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
	if b.total.Load() <= b.Limit() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.total.Load() > b.Limit() {
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
