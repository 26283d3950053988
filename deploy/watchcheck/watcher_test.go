package watchcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// How a watcher starts.
const (
	startNow   = "now"  // the newest acknowledged revision
	startBack  = "back" // a random earlier revision of the run
	startEmpty = ""     // resourceVersion="": consistent initial events
	startZero  = "0"    // resourceVersion="0": initial events from the cache
	startList  = "list" // sendInitialEvents=true (WatchList)
)

// watchSpec is one random watcher.
type watchSpec struct {
	ID        int
	Namespace string // "" for cluster-wide
	Label     string
	Field     string
	Start     string
	Bookmarks bool
	Protobuf  bool
	// Timeout of each watch request in seconds: short ones end and are
	// resumed from the last revision seen, as clients do.
	Timeout int64
}

func (s watchSpec) String() string {
	return fmt.Sprintf("watcher %d (ns=%q label=%q field=%q start=%q bookmarks=%v protobuf=%v timeout=%ds)",
		s.ID, s.Namespace, s.Label, s.Field, s.Start, s.Bookmarks, s.Protobuf, s.Timeout)
}

var (
	labelSelectors = []string{"", "", "app=a", "app!=a", "app in (a,b)", "app notin (c)", "tier", "!tier", "app=b,tier=x", "app"}
	fieldSelectors = []string{"", "", "", "metadata.namespace=ns-1", "metadata.name=cm-03", "metadata.name!=cm-05", "metadata.namespace!=ns-0"}
)

func randomSpec(rng *rand.Rand, id int, namespaces []string) watchSpec {
	s := watchSpec{
		ID:        id,
		Label:     labelSelectors[rng.IntN(len(labelSelectors))],
		Field:     fieldSelectors[rng.IntN(len(fieldSelectors))],
		Bookmarks: rng.IntN(2) == 0,
		Protobuf:  rng.IntN(2) == 0,
		Timeout:   []int64{2, 4, 3600, 3600}[rng.IntN(4)],
	}
	if rng.IntN(100) < 40 {
		s.Namespace = namespaces[rng.IntN(len(namespaces))]
	}
	switch r := rng.IntN(100); {
	case r < 20:
		s.Start = startNow
	case r < 55:
		s.Start = startBack
	case r < 70:
		s.Start = startEmpty
	case r < 85:
		s.Start = startZero
	default:
		s.Start, s.Bookmarks = startList, true
	}
	return s
}

// expiry is a 410 a watcher got.
type expiry struct {
	At      time.Time
	Segment int   // the segment it ended, -1 when the watch request itself failed
	From    int64 // the revision asked for, when the request itself failed
}

// watcher runs one watch through client-go, resuming it as a client does,
// and keeps everything it delivered, segment by segment.
type watcher struct {
	spec   watchSpec
	filter Filter
	cs     kubernetes.Interface
	hist   *History

	mu        sync.Mutex // guards everything below
	segs      []*Segment
	ends      []string // why each segment ended: "closed", "error", "410", "run end"
	expired   []expiry
	startErrs int
	resumes   int
	lastEvent time.Time // last event of a revision not seen before (not a bookmark)
	maxRV     int64     // newest revision of an event
	lastMark  int64     // newest bookmark
}

func (w *watcher) segments() ([]*Segment, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*Segment(nil), w.segs...), append([]string(nil), w.ends...)
}

// quiet reports whether no change event came for d, and the newest
// bookmark.
func (w *watcher) quiet(d time.Duration) (bool, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.lastEvent) >= d, w.lastMark
}

// run watches until ctx ends. from is the revision for startNow and
// startBack.
func (w *watcher) run(ctx context.Context, from int64) {
	rv, list := "", false
	switch w.spec.Start {
	case startNow, startBack:
		rv = strconv.FormatInt(from, 10)
	case startZero:
		rv = "0"
	case startList:
		list = true
	}
	for ctx.Err() == nil {
		next, again := w.segment(ctx, rv, list)
		if !again {
			return
		}
		rv = next
		if rv != "" {
			list = false // resumes from a revision
		} else {
			list = w.spec.Start == startList
		}
	}
}

// segment runs one watch request and returns the resourceVersion to resume
// from ("" when only a new initial state will do) and whether to go on.
func (w *watcher) segment(ctx context.Context, rv string, list bool) (string, bool) {
	seg := &Segment{Start: rv, WatchList: list, Began: time.Now()}
	if rv == "" {
		seg.NotBefore = w.hist.LastRev()
	}
	opts := metav1.ListOptions{
		LabelSelector: w.spec.Label, FieldSelector: w.spec.Field,
		ResourceVersion: rv, AllowWatchBookmarks: w.spec.Bookmarks || list, TimeoutSeconds: &w.spec.Timeout,
	}
	if list {
		t := true
		opts.SendInitialEvents = &t
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	wi, err := w.cs.CoreV1().ConfigMaps(w.spec.Namespace).Watch(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return "", false
		}
		w.mu.Lock()
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			from, _ := strconv.ParseInt(rv, 10, 64)
			w.expired = append(w.expired, expiry{At: time.Now(), Segment: -1, From: from})
			w.mu.Unlock()
			return "", true
		}
		w.startErrs++
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		return rv, true
	}
	defer wi.Stop()
	w.mu.Lock()
	w.segs = append(w.segs, seg)
	idx := len(w.segs) - 1
	w.ends = append(w.ends, "")
	w.mu.Unlock()

	// The resume point: a revision the stream is known complete up to.
	resume := rv
	initial := rv == "" || rv == "0"
	end := "closed"
	for ev := range wi.ResultChan() {
		e := EventOf(ev)
		w.mu.Lock()
		seg.Events = append(seg.Events, e)
		switch e.Type {
		case "BOOKMARK":
			w.lastMark = max(w.lastMark, e.RV)
		case "ERROR":
		default:
			if e.RV > w.maxRV { // not a repeat of initial events seen before
				w.maxRV, w.lastEvent = e.RV, time.Now()
			}
		}
		w.mu.Unlock()
		switch e.Type {
		case "BOOKMARK":
			resume, initial = strconv.FormatInt(e.RV, 10), false
		case "ERROR":
			end = "error"
			if e.Code == 410 {
				end = "410"
				w.mu.Lock()
				w.expired = append(w.expired, expiry{At: time.Now(), Segment: idx})
				w.mu.Unlock()
			}
		case "ADDED":
			if !initial {
				resume = strconv.FormatInt(e.RV, 10)
			}
		default:
			// Initial events are all ADDED: past them now.
			resume, initial = strconv.FormatInt(e.RV, 10), false
		}
	}
	w.mu.Lock()
	if ctx.Err() != nil {
		end = "run end"
		// client-go ends a cancelled watch with an ERROR of its own.
		if n := len(seg.Events); n > 0 && seg.Events[n-1].Type == "ERROR" && strings.Contains(seg.Events[n-1].Message, "context canceled") {
			seg.Events = seg.Events[:n-1]
		}
	}
	w.ends[idx] = end
	seg.Complete = end == "run end"
	if end != "run end" {
		w.resumes++
	}
	w.mu.Unlock()
	if end == "error" {
		// As client-go: back off before trying again.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	switch {
	case ctx.Err() != nil:
		return "", false
	case end == "410" || initial:
		return "", true // start over from a new initial state, as a relist would
	}
	return resume, true
}
