package watchcheck

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Object is what the checks compare of one ConfigMap version.
type Object struct {
	Namespace, Name string
	Labels          map[string]string
	// Data is data["v"], a counter the writer bumps.
	Data string
	// RV is the revision of the write that made this version.
	RV int64
}

// Key is namespace/name.
func (o *Object) Key() string { return o.Namespace + "/" + o.Name }

// Op is the kind of a write.
type Op uint8

// Writes.
const (
	Create Op = iota + 1
	Update
	Delete
)

func (op Op) String() string {
	switch op {
	case Create:
		return "create"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "?"
}

// Write is one acknowledged change of one key.
type Write struct {
	Rev  int64
	Op   Op
	Prev *Object // the version before; nil for Create
	Cur  *Object // the version after; nil for Delete
}

// Key is the namespace/name written.
func (w *Write) Key() string {
	if w.Cur != nil {
		return w.Cur.Key()
	}
	return w.Prev.Key()
}

// History is every write of a run in revision order. It is safe for
// concurrent use.
type History struct {
	mu     sync.Mutex // guards writes
	writes []Write
}

// Add appends w, whose revision must be above every earlier one's.
func (h *History) Add(w Write) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.writes); n > 0 && h.writes[n-1].Rev >= w.Rev {
		return fmt.Errorf("write %s %s at %d after one at %d", w.Op, w.Key(), w.Rev, h.writes[n-1].Rev)
	}
	h.writes = append(h.writes, w)
	return nil
}

// Insert adds w at its place in revision order: a write whose outcome
// was unknown (its connection broke) may be found made only after later
// writes were recorded. Slices Writes returned before stay as they were.
func (h *History) Insert(w Write) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.writes), func(i int) bool { return h.writes[i].Rev >= w.Rev })
	if i < len(h.writes) && h.writes[i].Rev == w.Rev {
		return fmt.Errorf("write %s %s at %d: %s %s has that revision", w.Op, w.Key(), w.Rev, h.writes[i].Op, h.writes[i].Key())
	}
	if i == len(h.writes) {
		h.writes = append(h.writes, w)
		return nil
	}
	h.writes = slices.Insert(slices.Clone(h.writes), i, w)
	return nil
}

// Seed records objs, which were there before the run, as creates at
// their revisions, so that the history's states include them. It is for
// an empty history, before any Add.
func (h *History) Seed(objs map[string]*Object) error {
	for _, o := range objs {
		if err := h.Insert(Write{Rev: o.RV, Op: Create, Cur: o}); err != nil {
			return err
		}
	}
	return nil
}

// Writes returns the writes so far; the caller must not change them.
func (h *History) Writes() []Write {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes[:len(h.writes):len(h.writes)]
}

// LastRev is the revision of the last write, 0 before any.
func (h *History) LastRev() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.writes) == 0 {
		return 0
	}
	return h.writes[len(h.writes)-1].Rev
}

// StateAt returns the objects after every write up to rev, by key.
func StateAt(writes []Write, rev int64) map[string]*Object {
	st := map[string]*Object{}
	for i := range writes {
		w := &writes[i]
		if w.Rev > rev {
			break
		}
		apply(st, w)
	}
	return st
}

func apply(st map[string]*Object, w *Write) {
	if w.Cur == nil {
		delete(st, w.Prev.Key())
	} else {
		st[w.Cur.Key()] = w.Cur
	}
}

// Filter is what a watch selects.
type Filter struct {
	Namespace string // "" for every namespace
	Labels    labels.Selector
	Fields    fields.Selector
}

// ParseFilter parses a watch's namespace and selectors.
func ParseFilter(ns, label, field string) (Filter, error) {
	ls, err := labels.Parse(label)
	if err != nil {
		return Filter{}, err
	}
	fs, err := fields.ParseSelector(field)
	if err != nil {
		return Filter{}, err
	}
	return Filter{Namespace: ns, Labels: ls, Fields: fs}, nil
}

// Matches reports whether o is selected.
func (f *Filter) Matches(o *Object) bool {
	if f.Namespace != "" && o.Namespace != f.Namespace {
		return false
	}
	return f.Labels.Matches(labels.Set(o.Labels)) &&
		f.Fields.Matches(fields.Set{"metadata.name": o.Name, "metadata.namespace": o.Namespace})
}

// Event is one watch event, expected or seen.
type Event struct {
	Type            string // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
	Namespace, Name string
	RV              int64
	Labels          map[string]string
	Data            string
	InitialEnd      bool  // a bookmark annotated k8s.io/initial-events-end
	Code            int32 // the Status code of an ERROR
	Message         string
}

func (e *Event) String() string {
	switch e.Type {
	case "BOOKMARK":
		if e.InitialEnd {
			return fmt.Sprintf("BOOKMARK rv=%d initial-events-end", e.RV)
		}
		return fmt.Sprintf("BOOKMARK rv=%d", e.RV)
	case "ERROR":
		return fmt.Sprintf("ERROR %d %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s %s/%s rv=%d labels=%s v=%s", e.Type, e.Namespace, e.Name, e.RV, labels.Set(e.Labels), e.Data)
}

func (e *Event) same(o *Event) bool {
	return e.Type == o.Type && e.Namespace == o.Namespace && e.Name == o.Name && e.RV == o.RV &&
		e.Data == o.Data && maps.Equal(e.Labels, o.Labels)
}

func eventOf(typ string, o *Object, rv int64) Event {
	return Event{Type: typ, Namespace: o.Namespace, Name: o.Name, RV: rv, Labels: o.Labels, Data: o.Data}
}

// Expected is what a watch with f from revision since must deliver, with
// kube-apiserver's semantics: an update that moves an object into the
// selection is ADDED, out of it DELETED carrying the previous version with
// the update's revision.
func (f *Filter) Expected(writes []Write, since int64) []Event {
	i := sort.Search(len(writes), func(i int) bool { return writes[i].Rev > since })
	var out []Event
	for ; i < len(writes); i++ {
		w := &writes[i]
		cur := w.Cur != nil && f.Matches(w.Cur)
		prev := w.Prev != nil && f.Matches(w.Prev)
		switch {
		case cur && prev:
			out = append(out, eventOf("MODIFIED", w.Cur, w.Rev))
		case cur:
			out = append(out, eventOf("ADDED", w.Cur, w.Rev))
		case prev:
			out = append(out, eventOf("DELETED", w.Prev, w.Rev))
		}
	}
	return out
}

// Initial is the state at rev that f selects, as ADDED events in key
// order.
func (f *Filter) Initial(writes []Write, rev int64) []Event {
	return f.initial(StateAt(writes, rev))
}

func (f *Filter) initial(st map[string]*Object) []Event {
	keys := slices.Sorted(maps.Keys(st))
	var out []Event
	for _, k := range keys {
		if o := st[k]; f.Matches(o) {
			out = append(out, eventOf("ADDED", o, o.RV))
		}
	}
	return out
}

// Segment is one watch request and what its stream delivered.
type Segment struct {
	// Start is the resourceVersion asked for: a revision, "" or "0".
	Start string
	// WatchList: sendInitialEvents=true (with resourceVersionMatch
	// NotOlderThan).
	WatchList bool
	// NotBefore is, for a consistent start ("" or a WatchList), the
	// newest revision acknowledged before the request: the snapshot may
	// not be older.
	NotBefore int64
	// Events in the order delivered.
	Events []Event
	// Complete: the stream ran until the end of the run, so it must hold
	// every expected event, not a prefix.
	Complete bool
	// Began is when the request was sent.
	Began time.Time
}

// Verdict is what Check found of one segment.
type Verdict struct {
	// Snapshot is the revision the stream starts after: the start
	// revision, or the snapshot of the initial events.
	Snapshot int64
	// Initial and Delivered count the initial and the change events.
	Initial, Delivered int
	// Bookmarks counts bookmarks.
	Bookmarks int
	// Through is the revision the stream was complete up to when it
	// ended: where a client resumes from.
	Through int64
}

// Check compares a segment of a watch with f with what the writes imply.
// It returns the first mismatch with context.
func (f *Filter) Check(writes []Write, seg *Segment) (Verdict, error) {
	var evs []Event // everything but a trailing ERROR
	for i := range seg.Events {
		if seg.Events[i].Type == "ERROR" {
			if i != len(seg.Events)-1 {
				return Verdict{}, fmt.Errorf("event #%d: ERROR before the end of the stream: %s", i, &seg.Events[i])
			}
			break
		}
		evs = append(evs, seg.Events[i])
	}
	if seg.Start != "" && seg.Start != "0" && !seg.WatchList {
		var since int64
		if _, err := fmt.Sscan(seg.Start, &since); err != nil {
			return Verdict{}, fmt.Errorf("bad start %q", seg.Start)
		}
		return f.checkFrom(writes, since, evs, seg.Complete)
	}
	if seg.WatchList {
		// The initial-events-end bookmark names the snapshot.
		for i := range evs {
			if evs[i].Type != "BOOKMARK" {
				continue
			}
			if !evs[i].InitialEnd {
				return Verdict{}, fmt.Errorf("event #%d: %s before the initial-events-end bookmark", i, &evs[i])
			}
			snap := evs[i].RV
			if snap < seg.NotBefore {
				return Verdict{}, fmt.Errorf("stale snapshot: initial events at %d, but %d was acknowledged before the watch", snap, seg.NotBefore)
			}
			init := f.Initial(writes, snap)
			if err := sameSet(init, evs[:i]); err != nil {
				return Verdict{}, fmt.Errorf("initial events at %d: %w", snap, err)
			}
			v, err := f.checkFrom(writes, snap, evs[i+1:], seg.Complete)
			v.Initial = i
			v.Bookmarks++
			if err != nil {
				return v, fmt.Errorf("after the initial events at %d (%d events): %w", snap, i, err)
			}
			return v, nil
		}
		if seg.Complete {
			return Verdict{}, fmt.Errorf("no initial-events-end bookmark in %d events", len(evs))
		}
		return Verdict{Initial: len(evs)}, nil // cut short; nothing to hold it against
	}
	// Legacy initial events ("" or "0"): find a snapshot whose state the
	// leading ADDED events are, with the changes after it following.
	lead := 0
	for lead < len(evs) && evs[lead].Type == "ADDED" {
		lead++
	}
	var (
		best     Verdict
		bestErr  error
		bestLen  = -1
		st       = map[string]*Object{}
		selected = 0 // objects of st that f selects
	)
	try := func(snap int64) bool {
		if seg.Start == "" && snap < seg.NotBefore {
			return false
		}
		if selected > len(evs) {
			// The stream ended inside the initial events: fine when it
			// was cut short and each is in the snapshot.
			ok := !seg.Complete && lead == len(evs) && f.initialIn(st, evs) == nil
			if ok {
				best, bestErr = Verdict{Snapshot: snap, Initial: len(evs), Through: snap}, nil
			}
			return ok
		}
		if selected > lead || f.initialIn(st, evs[:selected]) != nil {
			return false
		}
		v, err := f.checkFrom(writes, snap, evs[selected:], seg.Complete)
		v.Initial = selected
		if err == nil {
			best, bestErr = v, nil
			return true
		}
		if v.Delivered > bestLen {
			best, bestErr, bestLen = v, fmt.Errorf("after %d initial events (snapshot %d): %w", selected, snap, err), v.Delivered
		}
		return false
	}
	if try(0) {
		return best, nil
	}
	for i := range writes {
		w := &writes[i]
		if old, ok := st[w.Key()]; ok && f.Matches(old) {
			selected--
		}
		apply(st, w)
		if w.Cur != nil && f.Matches(w.Cur) {
			selected++
		}
		if try(w.Rev) {
			return best, nil
		}
	}
	if bestErr == nil {
		bestErr = fmt.Errorf("the %d leading ADDED events are the selected state at no revision (start %q, not before %d); stream: %s",
			lead, seg.Start, seg.NotBefore, around(evs, 0, 6))
	}
	return best, bestErr
}

// initialIn checks that evs are distinct ADDED events of objects of st
// that f selects, each with its version.
func (f *Filter) initialIn(st map[string]*Object, evs []Event) error {
	seen := make(map[string]bool, len(evs))
	for i := range evs {
		e := &evs[i]
		k := e.Namespace + "/" + e.Name
		o, ok := st[k]
		if !ok || seen[k] || !f.Matches(o) {
			return fmt.Errorf("initial event %s not in the snapshot (or twice)", e)
		}
		if want := eventOf("ADDED", o, o.RV); !e.same(&want) {
			return fmt.Errorf("initial event %s, want %s", e, &want)
		}
		seen[k] = true
	}
	return nil
}

// checkFrom compares evs, the stream after revision since, with the
// expected changes: the same events in the same order (a prefix unless
// complete); bookmarks non-decreasing, not behind since nor a delivered
// event, and each at R only once every expected event up to R was
// delivered.
func (f *Filter) checkFrom(writes []Write, since int64, evs []Event, complete bool) (Verdict, error) {
	want := f.Expected(writes, since)
	v := Verdict{Snapshot: since, Through: since}
	n := 0 // change events delivered
	lastBookmark := int64(-1)
	lastRV := since
	for i := range evs {
		e := &evs[i]
		if e.Type == "BOOKMARK" {
			v.Bookmarks++
			switch {
			case e.RV < lastBookmark:
				return v, fmt.Errorf("bookmark #%d at %d after one at %d", i, e.RV, lastBookmark)
			case e.RV < lastRV:
				return v, fmt.Errorf("bookmark #%d at %d behind the last delivered revision %d", i, e.RV, lastRV)
			case n < len(want) && want[n].RV <= e.RV:
				return v, fmt.Errorf("bookmark #%d at %d before event %s was delivered (delivered %d of %d); stream: %s; want: %s",
					i, e.RV, &want[n], n, len(want), around(evs, i, 3), around(want, n, 3))
			}
			lastBookmark = e.RV
			v.Through = max(v.Through, e.RV)
			continue
		}
		if n >= len(want) {
			return v, fmt.Errorf("event #%d %s: nothing more expected after %d events (duplicate or phantom); stream: %s; want (tail): %s",
				i, e, n, around(evs, i, 3), around(want, n, 3))
		}
		if !e.same(&want[n]) {
			return v, fmt.Errorf("event #%d: got %s, want %s; stream: %s; want: %s",
				i, e, &want[n], around(evs, i, 3), around(want, n, 3))
		}
		lastRV = e.RV
		v.Through = max(v.Through, e.RV)
		n++
		v.Delivered = n
	}
	if complete && n < len(want) {
		return v, fmt.Errorf("lost events: delivered %d of %d; first missing %s; want: %s", n, len(want), &want[n], around(want, n, 3))
	}
	return v, nil
}

// sameSet compares the initial events got with want, in any order.
func sameSet(want, got []Event) error {
	if len(want) != len(got) {
		return fmt.Errorf("%d initial events, want %d", len(got), len(want))
	}
	return subset(want, got)
}

// subset checks that every event of got is one of want, each once.
func subset(want, got []Event) error {
	byKey := make(map[string]*Event, len(want))
	for i := range want {
		byKey[want[i].Namespace+"/"+want[i].Name] = &want[i]
	}
	for i := range got {
		k := got[i].Namespace + "/" + got[i].Name
		w, ok := byKey[k]
		if !ok {
			return fmt.Errorf("initial event %s not in the snapshot (or twice)", &got[i])
		}
		if !w.same(&got[i]) {
			return fmt.Errorf("initial event %s, want %s", &got[i], w)
		}
		delete(byKey, k)
	}
	return nil
}

// around renders evs around i.
func around(evs []Event, i, n int) string {
	lo, hi := max(0, i-n), min(len(evs), i+n+1)
	var b strings.Builder
	b.WriteString("[")
	for j := lo; j < hi; j++ {
		if j > lo {
			b.WriteString(" | ")
		}
		if j == i {
			b.WriteString(">>")
		}
		fmt.Fprintf(&b, "#%d %s", j, &evs[j])
	}
	b.WriteString("]")
	return b.String()
}
