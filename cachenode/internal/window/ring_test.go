package window

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/storage"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func revs(items []*Item) []int64 {
	out := []int64{}
	for _, it := range items {
		out = append(out, it.Revision)
	}
	return out
}

// ev is a Modified event whose previous version, size bytes, only the
// window keeps: it is charged 1+size+itemOverhead.
func ev(rev int64, size int) event.Event {
	return event.Event{Type: event.Modified, Revision: rev, Key: "k", Object: make([]byte, size), PrevObject: make([]byte, size)}
}

// TestCharge: a window pays for what it alone keeps alive, not for the
// current versions the store holds.
func TestCharge(t *testing.T) {
	cur := []byte(`{"v":2}`)
	prev := store.NewEntry("/k", "ns", "n", 1, nil, nil, []byte(`{"v":1,"pad":"0123456789"}`), nil, nil)
	key := int64(len("/k"))
	tests := []struct {
		name string
		ev   event.Event
		prev *store.Entry
		want int64
	}{
		{"added: the store's", event.Event{Type: event.Added, Key: "/k", Object: cur}, nil, key + itemOverhead},
		{"modified: the superseded version", event.Event{Type: event.Modified, Key: "/k", Object: cur, PrevObject: prev.JSON}, prev, key + itemOverhead + prev.Size()},
		{"modified, no entry: the previous object", event.Event{Type: event.Modified, Key: "/k", Object: cur, PrevObject: prev.JSON}, nil, key + itemOverhead + int64(len(prev.JSON))},
		{"deleted: both", event.Event{Type: event.Deleted, Key: "/k", Object: cur, PrevObject: prev.JSON}, prev, key + itemOverhead + prev.Size() + int64(len(cur))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := New(Config{}, 0)
			r.Append(tt.ev, tt.prev)
			if _, got := r.Stats(); got != tt.want {
				t.Fatalf("charged %d bytes, want %d", got, tt.want)
			}
		})
	}
}

func TestSince(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	tests := []struct {
		name    string
		cfg     Config
		appends []int64 // revisions; 0 = advance the clock by one minute
		advance int64
		since   int64
		want    []int64
		seen    int64
		err     error
	}{
		{name: "empty", since: 10, want: []int64{}, seen: 10},
		{name: "all", appends: []int64{11, 12, 14}, since: 10, want: []int64{11, 12, 14}, seen: 14},
		{name: "middle", appends: []int64{11, 12, 14}, since: 12, want: []int64{14}, seen: 14},
		{name: "between revisions", appends: []int64{11, 12, 14}, since: 13, want: []int64{14}, seen: 14},
		{name: "up to date", appends: []int64{11, 12}, since: 12, want: []int64{}, seen: 12},
		{name: "ahead", appends: []int64{11}, since: 30, want: []int64{}, seen: 11},
		{name: "advanced", appends: []int64{11}, advance: 20, since: 11, want: []int64{}, seen: 20},
		{name: "older than start", appends: []int64{11}, since: 9, err: storage.ErrCompacted},
		{name: "one txn", appends: []int64{11, 11, 12}, since: 10, want: []int64{11, 11, 12}, seen: 12},
		{name: "count bound evicts", cfg: Config{MaxEvents: 2}, appends: []int64{11, 12, 13}, since: 11, want: []int64{12, 13}, seen: 13},
		{name: "count bound compacts", cfg: Config{MaxEvents: 2}, appends: []int64{11, 12, 13}, since: 10, err: storage.ErrCompacted},
		{name: "byte bound", cfg: Config{MaxBytes: 2*itemOverhead + 20}, appends: []int64{11, 12, 13}, since: 11, want: []int64{12, 13}, seen: 13},
		{name: "byte bound compacts", cfg: Config{MaxBytes: 2*itemOverhead + 20}, appends: []int64{11, 12, 13}, since: 10, err: storage.ErrCompacted},
		{name: "age bound", cfg: Config{MaxAge: 90 * time.Second}, appends: []int64{11, 0, 12, 0, 13}, since: 11, want: []int64{12, 13}, seen: 13},
		{name: "age bound compacts", cfg: Config{MaxAge: 90 * time.Second}, appends: []int64{11, 0, 12, 0, 13}, since: 10, err: storage.ErrCompacted},
		{name: "txn split by eviction", cfg: Config{MaxEvents: 2}, appends: []int64{11, 11, 12}, since: 10, err: storage.ErrCompacted},
		{name: "txn split by eviction, after it", cfg: Config{MaxEvents: 2}, appends: []int64{11, 11, 12}, since: 11, want: []int64{12}, seen: 12},
		{name: "growth keeps order", appends: seq(11, 300), since: 200, want: seq(201, 300), seen: 300},
		{name: "wraps around", cfg: Config{MaxEvents: 100}, appends: seq(11, 300), since: 250, want: seq(251, 300), seen: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Now = c.now
			r, err := New(cfg, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, rev := range tt.appends {
				if rev == 0 {
					c.t = c.t.Add(time.Minute)
					continue
				}
				r.Append(ev(rev, 5), nil)
			}
			if tt.advance != 0 {
				r.Advance(tt.advance)
			}
			got, seen, err := r.Since(tt.since, nil, 0)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Since = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(revs(got), tt.want) || seen != tt.seen {
				t.Fatalf("Since = %v seen %d err %v, want %v seen %d", revs(got), seen, err, tt.want, tt.seen)
			}
		})
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestSinceMaxBytes(t *testing.T) {
	r, _ := New(Config{}, 10)
	for _, rev := range []int64{11, 12, 12, 13} {
		r.Append(ev(rev, 100), nil)
	}
	got, seen, err := r.Since(10, nil, itemOverhead+150)
	if err != nil || !reflect.DeepEqual(revs(got), []int64{11}) || seen != 11 {
		t.Fatalf("Since = %v %d %v", revs(got), seen, err)
	}
	// a transaction is never split, and one event always comes back
	got, seen, _ = r.Since(11, nil, 1)
	if !reflect.DeepEqual(revs(got), []int64{12, 12}) || seen != 12 {
		t.Fatalf("Since = %v %d", revs(got), seen)
	}
}

func TestExpire(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	r, _ := New(Config{MaxAge: time.Minute, Now: c.now}, 10)
	r.Append(ev(11, 1), nil)
	r.Append(ev(12, 1), nil)
	c.t = c.t.Add(2 * time.Minute)
	r.Expire()
	if n, _ := r.Stats(); n != 0 {
		t.Fatalf("%d events after Expire", n)
	}
	if from, seen := r.Bounds(); from != 12 || seen != 12 {
		t.Fatalf("Bounds = %d %d", from, seen)
	}
	if got, seen, err := r.Since(12, nil, 0); err != nil || len(got) != 0 || seen != 12 {
		t.Fatalf("Since(12) = %v %d %v", got, seen, err)
	}
}

func TestChanges(t *testing.T) {
	r, _ := New(Config{MaxEvents: 3}, 10)
	prev := store.NewEntry("b", "", "b", 3, nil, nil, nil, nil, nil)
	r.Append(event.Event{Type: event.Added, Revision: 11, Key: "a"}, nil)
	r.Append(event.Event{Type: event.Modified, Revision: 12, Key: "b"}, prev)
	r.Append(event.Event{Type: event.Deleted, Revision: 13, Key: "c"}, prev)
	got, err := r.Changes(10, 12, nil, 0)
	want := []store.Change{{Key: "a"}, {Key: "b", Prev: prev}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Changes = %v %v", got, err)
	}
	if _, err := r.Changes(10, 13, nil, 2); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Changes over max = %v", err)
	}
	r.Append(event.Event{Type: event.Added, Revision: 14, Key: "d"}, nil)
	if _, err := r.Changes(10, 14, nil, 0); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Changes before window = %v", err)
	}
	if got, err := r.Changes(13, 13, nil, 0); err != nil || len(got) != 0 {
		t.Fatalf("Changes(13, 13) = %v %v", got, err)
	}
}

func TestConfig(t *testing.T) {
	if _, err := New(Config{MaxEvents: -1}, 0); err == nil {
		t.Fatal("negative MaxEvents accepted")
	}
}

// A reader between the events of one transaction is not told the revision
// is complete.
func TestSeenWaitsForTheWholeRevision(t *testing.T) {
	r, err := New(Config{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	r.Append(event.Event{Type: event.Added, Revision: 12, Index: 0, Count: 2, Key: "a"}, nil)
	items, seen, err := r.Since(10, nil, 0)
	if err != nil || len(items) != 1 || seen != 11 {
		t.Fatalf("mid-transaction Since = %d items, seen %d, %v; want 1 item, seen 11", len(items), seen, err)
	}
	r.Append(event.Event{Type: event.Added, Revision: 12, Index: 1, Count: 2, Key: "b"}, nil)
	if items, seen, err = r.Since(10, nil, 0); err != nil || len(items) != 2 || seen != 12 {
		t.Fatalf("after the transaction Since = %d items, seen %d, %v; want 2 items, seen 12", len(items), seen, err)
	}
}
