package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/kgate/kgate/deploy/chaos/report"
	"github.com/kgate/kgate/deploy/watchcheck"
)

// finding is one violation or one checked item, with the time it belongs
// to (for the fault windows).
type finding struct {
	At   time.Time
	What string
}

// verdicts is what the checkers found over the whole run.
type verdicts struct {
	events                             []time.Time // events checked, by arrival
	lost, duplicated, reordered, other []finding
	writes                             []time.Time // acknowledged writes checked
	writesLost, writesTwice            []finding
	reads                              []time.Time // consistent reads checked
	lists                              []finding   // consistent LISTs that were not exact snapshots
	linearizable                       string
	relists                            []finding // watchers' and informers' lists after the first
}

// checkWrites holds every acknowledged write against etcd's history:
// there at its revision with what the client wrote, and no value written
// twice.
func checkWrites(v *verdicts, writes []watchcheck.Write, acks []ack) {
	byRev := func(rev int64) *watchcheck.Write {
		i := sort.Search(len(writes), func(i int) bool { return writes[i].Rev >= rev })
		if i < len(writes) && writes[i].Rev == rev {
			return &writes[i]
		}
		return nil
	}
	for _, a := range acks {
		v.writes = append(v.writes, a.At)
		w := byRev(a.Rev)
		switch {
		case w == nil:
			v.writesLost = append(v.writesLost, finding{a.At, fmt.Sprintf("%s %s acknowledged at revision %d: etcd has no write of it there", a.Op, a.Key, a.Rev)})
		case w.Key() != a.Key || w.Op != a.Op || (w.Cur != nil && w.Cur.Data != a.Data):
			v.writesLost = append(v.writesLost, finding{a.At, fmt.Sprintf("%s %s=%q acknowledged at revision %d: etcd has %s %s there", a.Op, a.Key, a.Data, a.Rev, w.Op, w.Key())})
		}
	}
	ackAt := map[int64]time.Time{}
	for _, a := range acks {
		ackAt[a.Rev] = a.At
	}
	seen := map[string]int64{}
	for _, w := range writes {
		if w.Cur == nil || w.Op == watchcheck.Delete {
			continue
		}
		if prev, ok := seen[w.Cur.Data]; ok {
			v.writesTwice = append(v.writesTwice, finding{ackAt[w.Rev], fmt.Sprintf("%s=%q written at revisions %d and %d", w.Key(), w.Cur.Data, prev, w.Rev)})
		}
		seen[w.Cur.Data] = w.Rev
	}
}

// checkWatcher tallies one watcher's events over all its watch requests
// against what etcd's history implies from its start: lost (expected,
// never delivered, and not skipped by a relist), duplicated, reordered,
// and any other difference, with watchcheck's first mismatch per request
// for the details.
func checkWatcher(v *verdicts, w *watcher, writes []watchcheck.Write, from int64, ackAt map[int64]time.Time) {
	segs := w.segments()
	type got struct {
		e  watchcheck.Event
		at time.Time
	}
	var stream []got
	var skipped [][2]int64 // (from, to] ranges a relist skipped
	last := from
	for k, s := range segs {
		if s.Relist {
			start, _ := parseRev(s.Start)
			skipped = append(skipped, [2]int64{last, start})
			v.relists = append(v.relists, finding{s.Began, fmt.Sprintf("%s, watch #%d through gateway %d: listed again at %s after its watch could not resume", w.desc(), k, s.Gateway, s.Start)})
		}
		if _, err := w.filter.Check(writes, &s.Segment); err != nil {
			v.other = append(v.other, finding{s.Began, fmt.Sprintf("%s, watch #%d from %s through gateway %d: %v", w.desc(), k, s.Start, s.Gateway, err)})
		}
		for i, e := range s.Events {
			if e.Type == "BOOKMARK" || e.Type == "ERROR" {
				continue
			}
			stream = append(stream, got{e, s.At[i]})
			last = max(last, e.RV)
		}
	}
	through := w.at()
	want := w.filter.Expected(writes, from)
	wanted := map[int64]watchcheck.Event{}
	for _, e := range want {
		if e.RV <= through {
			wanted[e.RV] = e
		}
	}
	delivered := map[int64]bool{}
	var high int64
	for _, g := range stream {
		v.events = append(v.events, g.at)
		switch {
		case delivered[g.e.RV]:
			v.duplicated = append(v.duplicated, finding{g.at, fmt.Sprintf("%s: %s delivered again", w.desc(), &g.e)})
			continue
		case g.e.RV < high:
			v.reordered = append(v.reordered, finding{g.at, fmt.Sprintf("%s: %s after an event at %d", w.desc(), &g.e, high)})
		}
		delivered[g.e.RV] = true
		high = max(high, g.e.RV)
		if e, ok := wanted[g.e.RV]; !ok || e.Type != g.e.Type || e.Data != g.e.Data || e.Name != g.e.Name {
			v.other = append(v.other, finding{g.at, fmt.Sprintf("%s: delivered %s, the history implies %v", w.desc(), &g.e, e.String())})
		}
	}
	for rev, e := range wanted {
		if delivered[rev] || inSkipped(skipped, rev) {
			continue
		}
		v.lost = append(v.lost, finding{ackAt[rev], fmt.Sprintf("%s: %s never delivered", w.desc(), &e)})
	}
}

func inSkipped(rs [][2]int64, rev int64) bool {
	for _, r := range rs {
		if rev > r[0] && rev <= r[1] {
			return true
		}
	}
	return false
}

func parseRev(s string) (int64, error) {
	var n int64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// checkReads runs porcupine over the consistent GETs and checks every
// consistent LIST as a snapshot.
func checkReads(v *verdicts, writes []watchcheck.Write, kv []KVOp, lists []listRead, vis string) error {
	for _, op := range kv {
		if !op.Write {
			v.reads = append(v.reads, op.Return)
		}
	}
	for _, l := range lists {
		v.reads = append(v.reads, l.At)
		if err := ListCheck(writes, l.Rev, l.AckedBefore, l.Objects); err != nil {
			v.lists = append(v.lists, finding{l.At, err.Error()})
		}
	}
	verdict, err := Linearizable(kv, 5*time.Minute, vis)
	v.linearizable = verdict
	if verdict == "ok" && len(v.lists) > 0 {
		v.linearizable = "violation"
	}
	return err
}

// window counts what falls in [from, to] (every time when to is zero).
func (v *verdicts) window(from, to time.Time, requests []report.Request, stale, falses []time.Time) report.Checks {
	in := func(t time.Time) bool { return to.IsZero() || (!t.Before(from) && !t.After(to)) }
	count := func(ts []time.Time) int {
		n := 0
		for _, t := range ts {
			if in(t) {
				n++
			}
		}
		return n
	}
	countF := func(fs []finding) int {
		n := 0
		for _, f := range fs {
			if in(f.At) {
				n++
			}
		}
		return n
	}
	c := report.Checks{
		Events: count(v.events), Lost: countF(v.lost), Duplicated: countF(v.duplicated), Reordered: countF(v.reordered),
		Writes: count(v.writes), WritesLost: countF(v.writesLost), WritesTwice: countF(v.writesTwice), FalseConflicts: count(falses),
		Reads: count(v.reads), StaleReads: count(stale), Relists: countF(v.relists),
		Linearizable: v.linearizable,
	}
	for _, r := range requests {
		if in(r.End) {
			c.Requests++
			if r.Failed {
				c.Failed++
			}
		}
	}
	return c
}

// problems lists every violation, oldest first.
func (v *verdicts) problems() []finding {
	var out []finding
	for _, fs := range [][]finding{v.lost, v.duplicated, v.reordered, v.other, v.writesLost, v.writesTwice, v.lists, v.relists} {
		out = append(out, fs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// countIn counts the findings in [from, to].
func countIn(fs []finding, from, to time.Time) int {
	n := 0
	for _, f := range fs {
		if !f.At.Before(from) && !f.At.After(to) {
			n++
		}
	}
	return n
}
