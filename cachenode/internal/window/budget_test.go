package window

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kgate/kgate/storage"
)

// itemSize is the accounted size of ev(rev, 100).
const itemSize = 100 + 1 + itemOverhead

func TestBudgetEvictsOldestAcrossWindows(t *testing.T) {
	b, err := NewBudget(BudgetConfig{Max: 6 * itemSize})
	if err != nil {
		t.Fatal(err)
	}
	busy, _ := New(Config{Budget: b}, 0)
	quiet, _ := New(Config{Budget: b}, 0)
	// quiet has revisions 2 and 5; busy everything else up to 12.
	for rev := int64(1); rev <= 12; rev++ {
		w := busy
		if rev == 2 || rev == 5 {
			w = quiet
		}
		w.Append(ev(rev, 100), nil)
		if got := b.Bytes(); got > 6*itemSize {
			t.Fatalf("after revision %d the windows hold %d bytes, over the budget of %d", rev, got, 6*itemSize)
		}
	}
	// Six events fit: the newest six revisions are 7..12, all busy's, but
	// quiet keeps its newest event.
	got, _, err := busy.Since(busy.from, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{8, 9, 10, 11, 12}; !slices.Equal(revs(got), want) {
		t.Fatalf("busy holds %v, want %v", revs(got), want)
	}
	if _, _, err := busy.Since(6, nil, 0); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("busy since 6: %v, want ErrCompacted (revision 7 was evicted)", err)
	}
	if got, _, err := quiet.Since(2, nil, 0); err != nil || !slices.Equal(revs(got), []int64{5}) {
		t.Fatalf("quiet since 2: %v %v, want [5]", revs(got), err)
	}
	if _, _, err := quiet.Since(1, nil, 0); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("quiet since 1: %v, want ErrCompacted (revision 2 was evicted)", err)
	}
	if b.Evictions() != 6 {
		t.Fatalf("evictions %d, want 6", b.Evictions())
	}
	// A released window leaves the budget with its bytes.
	before := b.Bytes()
	_, qb := quiet.Stats()
	quiet.Release()
	if b.Bytes() != before-qb {
		t.Fatalf("after release %d bytes, want %d", b.Bytes(), before-qb)
	}
	busy.Append(ev(13, 100), nil)
	if _, bb := busy.Stats(); bb != b.Bytes() || b.Bytes() > 6*itemSize {
		t.Fatalf("budget holds %d, busy %d", b.Bytes(), bb)
	}
}

func TestBudgetKeepsNewestEvent(t *testing.T) {
	b, _ := NewBudget(BudgetConfig{Max: 1})
	w1, _ := New(Config{Budget: b}, 0)
	w2, _ := New(Config{Budget: b}, 0)
	w1.Append(ev(1, 10), nil)
	w2.Append(ev(2, 10), nil)
	w1.Append(ev(3, 10), nil)
	if n, _ := w1.Stats(); n != 1 {
		t.Fatalf("w1 holds %d events, want its newest only", n)
	}
	if n, _ := w2.Stats(); n != 1 {
		t.Fatalf("w2 holds %d events, want its newest only", n)
	}
	for _, bad := range []BudgetConfig{{}, {Max: 1, Min: -1}, {Max: 1, Share: -0.5}, {Max: 1, Share: math.NaN()}} {
		if _, err := NewBudget(bad); err == nil {
			t.Errorf("budget %+v was accepted", bad)
		}
	}
}

// TestBudgetConcurrent appends to several windows at once, releasing and
// replacing some, and checks the accounting: the budget's total is the
// sum of its windows' bytes and within the bound once appends stop.
func TestBudgetConcurrent(t *testing.T) {
	const max = 50 * itemSize
	b, _ := NewBudget(BudgetConfig{Max: max})
	var wg sync.WaitGroup
	rings := make([]*Ring, 8)
	for i := range rings {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			w, _ := New(Config{Budget: b}, 0)
			// Window i gets revisions k*len(rings)+i: increasing in each
			// window, as a reflector's are, and interleaved across them.
			for k := range int64(2000) {
				rev := k*int64(len(rings)) + int64(i) + 1
				if r.IntN(200) == 0 { // a relist: a new window replaces the old
					old := w
					w, _ = New(Config{Budget: b}, rev-1)
					old.Release()
				}
				w.Append(ev(rev, r.IntN(200)), nil)
			}
			rings[i] = w
		})
	}
	wg.Wait()
	var sum int64
	for _, w := range rings {
		_, bytes := w.Stats()
		sum += bytes
	}
	if sum != b.Bytes() {
		t.Fatalf("windows hold %d bytes, the budget counts %d", sum, b.Bytes())
	}
	if b.Bytes() > max {
		t.Fatalf("windows hold %d bytes, over the budget of %d", b.Bytes(), max)
	}
}

// TestBudgetShare: the windows may hold a share of their stores' bytes,
// within min and max; a store that shrinks takes history with it, and a
// released window's store leaves the base.
func TestBudgetShare(t *testing.T) {
	b, err := NewBudget(BudgetConfig{Max: 20 * itemSize, Min: 4 * itemSize, Share: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := New(Config{Budget: b}, 0)
	other, _ := New(Config{Budget: b}, 0)
	rev := int64(0)
	fill := func() {
		for range 30 {
			rev++
			w.Append(ev(rev, 100), nil)
		}
	}
	steps := []struct {
		name       string
		base, from int64 // w's and other's store bytes
		release    bool  // release other first
		want       int64 // the limit, in items
	}{
		{name: "empty stores: min", want: 4},
		{name: "share between min and max", base: 16 * itemSize, want: 8},
		{name: "two stores add up", base: 16 * itemSize, from: 8 * itemSize, want: 12},
		{name: "share past max: max", base: 60 * itemSize, from: 8 * itemSize, want: 20},
		{name: "store shrinks: history goes", base: 12 * itemSize, from: 8 * itemSize, want: 10},
		{name: "released window leaves the base", base: 12 * itemSize, from: 8 * itemSize, release: true, want: 6},
	}
	for _, s := range steps {
		if s.release {
			other.Release()
		} else {
			other.SetBase(s.from)
		}
		w.SetBase(s.base)
		if got := b.Limit(); got != s.want*itemSize {
			t.Fatalf("%s: limit %d, want %d", s.name, got, s.want*itemSize)
		}
		if n, bytes := w.Stats(); bytes > b.Limit() || n > int(s.want) {
			t.Fatalf("%s: window holds %d events, %d bytes, over the limit %d", s.name, n, bytes, b.Limit())
		}
		fill()
		if n, _ := w.Stats(); n != int(s.want) {
			t.Fatalf("%s: filled window holds %d events, want %d", s.name, n, s.want)
		}
	}
}

// TestBudgetEvictedAge: the budget tells how old the events it evicts
// are, how far back its windows reach.
func TestBudgetEvictedAge(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	b, _ := NewBudget(BudgetConfig{Max: 2 * itemSize})
	w, _ := New(Config{Budget: b, Now: c.now}, 0)
	if b.EvictedAge() != 0 {
		t.Fatalf("evicted age %v before any eviction", b.EvictedAge())
	}
	for rev := int64(1); rev <= 4; rev++ {
		w.Append(ev(rev, 100), nil)
		c.t = c.t.Add(10 * time.Second)
	}
	// Revision 2, appended at 1010, went when revision 4 came at 1030.
	if got := b.EvictedAge(); got != 20*time.Second {
		t.Fatalf("evicted age %v, want 20s", got)
	}
}
