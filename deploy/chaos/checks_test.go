package chaos

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kgate/kgate/deploy/watchcheck"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestLinearizable(t *testing.T) {
	w := func(key string, rv int64, call, ret int) KVOp {
		return KVOp{Key: key, Write: true, RV: rv, Rev: rv, Call: at(call), Return: at(ret)}
	}
	r := func(key string, rv int64, call, ret int) KVOp {
		return KVOp{Key: key, RV: rv, Call: at(call), Return: at(ret), Client: 1}
	}
	for _, tc := range []struct {
		name  string
		ops   []KVOp
		want  string
		stale int
	}{
		{name: "reads after writes", ops: []KVOp{w("a", 5, 0, 10), r("a", 5, 20, 30), w("a", 7, 40, 50), r("a", 7, 60, 70)}, want: "ok"},
		{name: "a read concurrent with a write may see either", ops: []KVOp{w("a", 5, 0, 10), w("a", 7, 20, 50), r("a", 5, 30, 40), r("a", 7, 45, 60)}, want: "ok"},
		{name: "NotFound before the create", ops: []KVOp{r("a", 0, 0, 5), w("a", 5, 10, 20)}, want: "ok"},
		{name: "stale read after an acknowledged update", ops: []KVOp{w("a", 5, 0, 10), w("a", 7, 20, 30), r("a", 5, 40, 50)}, want: "violation", stale: 1},
		{name: "NotFound after an acknowledged create", ops: []KVOp{w("a", 5, 0, 10), r("a", 0, 20, 30)}, want: "violation", stale: 1},
		{name: "object after an acknowledged delete", ops: []KVOp{w("a", 5, 0, 10), {Key: "a", Write: true, RV: 0, Rev: 9, Call: at(20), Return: at(30)}, r("a", 5, 40, 50)}, want: "violation", stale: 1},
		{name: "going back in time between two reads", ops: []KVOp{w("a", 5, 0, 10), w("a", 7, 20, 100), r("a", 7, 30, 40), r("a", 5, 50, 60)}, want: "violation"},
		{name: "keys are independent", ops: []KVOp{w("a", 5, 0, 10), w("b", 6, 0, 10), r("b", 6, 20, 30), r("a", 5, 20, 30)}, want: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Linearizable(tc.ops, time.Minute, "")
			if err != nil || got != tc.want {
				t.Errorf("Linearizable = %q, %v; want %q", got, err, tc.want)
			}
			if s := StaleGets(tc.ops); len(s) != tc.stale {
				t.Errorf("StaleGets = %q, want %d", s, tc.stale)
			}
		})
	}
}

func obj(name string, rv int64, data string) *watchcheck.Object {
	return &watchcheck.Object{Namespace: Namespace, Name: name, RV: rv, Data: data}
}

// history: a created at 10, b created at 11, a updated at 12, b deleted
// at 13.
func history() []watchcheck.Write {
	a10, b11, a12 := obj("a", 10, "1"), obj("b", 11, "2"), obj("a", 12, "3")
	return []watchcheck.Write{
		{Rev: 10, Op: watchcheck.Create, Cur: a10},
		{Rev: 11, Op: watchcheck.Create, Cur: b11},
		{Rev: 12, Op: watchcheck.Update, Prev: a10, Cur: a12},
		{Rev: 13, Op: watchcheck.Delete, Prev: b11},
	}
}

func TestListCheck(t *testing.T) {
	ws := history()
	state := func(objs ...*watchcheck.Object) map[string]*watchcheck.Object {
		m := map[string]*watchcheck.Object{}
		for _, o := range objs {
			m[o.Key()] = o
		}
		return m
	}
	for _, tc := range []struct {
		name       string
		rev, acked int64
		got        map[string]*watchcheck.Object
		err        string
	}{
		{name: "exact at 11", rev: 11, acked: 11, got: state(obj("a", 10, "1"), obj("b", 11, "2"))},
		{name: "exact at 20 (other namespaces moved on)", rev: 20, acked: 13, got: state(obj("a", 12, "3"))},
		{name: "older than an acknowledged write", rev: 11, acked: 12, got: state(obj("a", 10, "1"), obj("b", 11, "2")), err: "older than the write"},
		{name: "missing an object", rev: 11, acked: 11, got: state(obj("a", 10, "1")), err: "has 1 objects, the history 2"},
		{name: "a version from another revision", rev: 12, acked: 12, got: state(obj("a", 10, "1"), obj("b", 11, "2")), err: "chaos/a at 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ListCheck(ws, tc.rev, tc.acked, tc.got)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("ListCheck = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestCheckWrites(t *testing.T) {
	ws := history()
	ok := []ack{
		{At: at(1), Rev: 10, Op: watchcheck.Create, Key: "chaos/a", Data: "1"},
		{At: at(2), Rev: 13, Op: watchcheck.Delete, Key: "chaos/b"},
	}
	v := &verdicts{}
	checkWrites(v, ws, ok)
	if len(v.writes) != 2 || len(v.writesLost) != 0 || len(v.writesTwice) != 0 {
		t.Errorf("good acks: %d checked, lost %v, twice %v", len(v.writes), v.writesLost, v.writesTwice)
	}
	v = &verdicts{}
	checkWrites(v, ws, []ack{
		{At: at(1), Rev: 14, Op: watchcheck.Update, Key: "chaos/a", Data: "9"}, // not in etcd
		{At: at(2), Rev: 12, Op: watchcheck.Update, Key: "chaos/a", Data: "8"}, // etcd has another value there
	})
	if len(v.writesLost) != 2 {
		t.Errorf("lost acks: %v", v.writesLost)
	}
	twice := append(history(), watchcheck.Write{Rev: 14, Op: watchcheck.Update, Prev: obj("a", 12, "3"), Cur: obj("a", 14, "3")})
	v = &verdicts{}
	checkWrites(v, twice, nil)
	if len(v.writesTwice) != 1 {
		t.Errorf("a value written twice: %v", v.writesTwice)
	}
}

func TestCheckWatcher(t *testing.T) {
	ws := history()
	f, err := watchcheck.ParseFilter(Namespace, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ string, o *watchcheck.Object, rev int64) watchcheck.Event {
		return watchcheck.Event{Type: typ, Namespace: o.Namespace, Name: o.Name, RV: rev, Data: o.Data}
	}
	added10, added11, mod12, del13 := ev("ADDED", obj("a", 10, "1"), 10), ev("ADDED", obj("b", 11, "2"), 11), ev("MODIFIED", obj("a", 12, "3"), 12), ev("DELETED", obj("b", 11, "2"), 13)
	seg := func(start int64, relist bool, evs ...watchcheck.Event) *segment {
		s := &segment{Segment: watchcheck.Segment{Start: strconv.FormatInt(start, 10), Events: evs, Began: at(0)}, Relist: relist}
		for range evs {
			s.At = append(s.At, at(5))
		}
		return s
	}
	for _, tc := range []struct {
		name                  string
		segs                  []*segment
		lost, dup, reord, rel int
	}{
		{name: "all in one watch", segs: []*segment{seg(9, false, added10, added11, mod12, del13)}},
		{name: "resumed where it ended", segs: []*segment{seg(9, false, added10, added11), seg(11, false, mod12, del13)}},
		{name: "an event lost between two watches", segs: []*segment{seg(9, false, added10), seg(11, false, mod12, del13)}, lost: 1},
		{name: "an event twice", segs: []*segment{seg(9, false, added10, added11), seg(10, false, added11, mod12, del13)}, dup: 1},
		{name: "reordered", segs: []*segment{seg(9, false, added10, mod12, added11, del13)}, reord: 1},
		{name: "a relist skips what it listed", segs: []*segment{seg(9, false, added10), seg(12, true, del13)}, rel: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{ns: Namespace, filter: f, segs: tc.segs, through: 13}
			v := &verdicts{}
			checkWatcher(v, w, ws, 9, map[int64]time.Time{})
			if len(v.lost) != tc.lost || len(v.duplicated) != tc.dup || len(v.reordered) != tc.reord || len(v.relists) != tc.rel {
				t.Errorf("lost %v, duplicated %v, reordered %v, relists %d; want %d/%d/%d/%d", v.lost, v.duplicated, v.reordered, len(v.relists), tc.lost, tc.dup, tc.reord, tc.rel)
			}
			// Each watch on its own is checked by watchcheck too: only
			// the reorder is inside one watch.
			if (tc.reord > 0) != (len(v.other) > 0) {
				t.Errorf("per-watch mismatches %v", v.other)
			}
		})
	}
}
