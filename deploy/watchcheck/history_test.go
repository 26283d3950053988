package watchcheck

import (
	"strings"
	"testing"
)

// The checker must catch what it is there to catch: these streams are
// made by hand against a small history.
func TestCheck(t *testing.T) {
	obj := func(name, app, v string, rv int64) *Object {
		return &Object{Namespace: "ns", Name: name, Labels: map[string]string{"app": app}, Data: v, RV: rv}
	}
	a1 := obj("a", "x", "1", 10)
	b1 := obj("b", "x", "1", 11)
	a2 := obj("a", "y", "2", 12) // a leaves app=x
	b2 := obj("b", "x", "2", 13)
	a3 := obj("a", "x", "3", 14) // a comes back
	writes := []Write{
		{Rev: 10, Op: Create, Cur: a1},
		{Rev: 11, Op: Create, Cur: b1},
		{Rev: 12, Op: Update, Prev: a1, Cur: a2},
		{Rev: 13, Op: Update, Prev: b1, Cur: b2},
		{Rev: 14, Op: Update, Prev: a2, Cur: a3},
		{Rev: 15, Op: Delete, Prev: b2},
	}
	f, err := ParseFilter("", "app=x", "")
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ string, o *Object, rv int64) Event { return eventOf(typ, o, rv) }
	bm := func(rv int64) Event { return Event{Type: "BOOKMARK", RV: rv} }
	all := []Event{ev("DELETED", a1, 12), ev("MODIFIED", b2, 13), ev("ADDED", a3, 14), ev("DELETED", b2, 15)}
	check := func(name string, seg Segment, wantErr string) {
		t.Helper()
		_, err := f.Check(writes, &seg)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%s: got error %v, want one with %q", name, err, wantErr)
		}
	}
	check("exact", Segment{Start: "11", Events: all, Complete: true}, "")
	check("prefix", Segment{Start: "11", Events: all[:2]}, "")
	check("lost at the end", Segment{Start: "11", Events: all[:3], Complete: true}, "lost events")
	check("lost inside", Segment{Start: "11", Events: []Event{all[0], all[2], all[3]}}, "event #1")
	check("duplicate", Segment{Start: "11", Events: []Event{all[0], all[1], all[1], all[2], all[3]}}, "event #2")
	check("reordered", Segment{Start: "11", Events: []Event{all[1], all[0], all[2], all[3]}}, "event #0")
	check("phantom", Segment{Start: "11", Events: append(append([]Event(nil), all...), all[3])}, "nothing more expected")
	check("wrong prev state", Segment{Start: "11", Events: []Event{ev("DELETED", a2, 12)}}, "event #0")
	check("bookmarks", Segment{Start: "11", Events: []Event{bm(11), all[0], bm(12), all[1], all[2], bm(14), all[3], bm(15)}, Complete: true}, "")
	check("bookmark ahead", Segment{Start: "11", Events: []Event{all[0], bm(13), all[1]}}, "before event")
	check("bookmark backwards", Segment{Start: "11", Events: []Event{all[0], bm(12), bm(11)}}, "after one at")
	check("bookmark behind start", Segment{Start: "11", Events: []Event{bm(10)}}, "behind")
	check("legacy initial", Segment{Start: "", NotBefore: 11, Events: []Event{ev("ADDED", b1, 11), ev("ADDED", a1, 10), all[0], all[1]}}, "")
	check("legacy initial, stale", Segment{Start: "", NotBefore: 13, Events: []Event{ev("ADDED", b1, 11), ev("ADDED", a1, 10), all[0], all[1]}}, "at no revision")
	check("legacy initial from the cache", Segment{Start: "0", Events: []Event{ev("ADDED", a1, 10), ev("ADDED", b1, 11), all[0]}}, "")
	check("legacy initial, missing one", Segment{Start: "0", Events: []Event{ev("ADDED", b1, 11), all[0], all[1]}, Complete: true}, "initial events")
	check("legacy initial, cut short", Segment{Start: "0", Events: []Event{ev("ADDED", b1, 11)}}, "")
	check("watchlist", Segment{Start: "", WatchList: true, NotBefore: 13, Events: []Event{ev("ADDED", b2, 13), {Type: "BOOKMARK", RV: 13, InitialEnd: true}, all[2], all[3]}, Complete: true}, "")
	check("watchlist, stale", Segment{Start: "", WatchList: true, NotBefore: 13, Events: []Event{ev("ADDED", b1, 11), ev("ADDED", a1, 10), {Type: "BOOKMARK", RV: 11, InitialEnd: true}}}, "stale snapshot")
	check("watchlist, wrong state", Segment{Start: "", WatchList: true, Events: []Event{ev("ADDED", b1, 11), {Type: "BOOKMARK", RV: 13, InitialEnd: true}}}, "initial events at 13")
}
