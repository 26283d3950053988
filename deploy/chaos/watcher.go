package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/deploy/watchcheck"
)

// watchIdle ends a watch that delivered nothing (not even a bookmark)
// for this long: a gateway cut off from its client sends nothing, and the
// client moves on, as client-go's HTTP/2 health check makes informers do.
const watchIdle = 30 * time.Second

// watcher watches the writers' ConfigMaps with one selector, with
// bookmarks, from a revision; when a stream ends it resumes from the
// newest revision it saw, through the next gateway. Each watch request is
// a watchcheck.Segment. A watch that answers 410 Gone makes it list again
// (a relist, which kgate promises clients never need for a failover) and
// watch from the list's revision.
type watcher struct {
	id     int
	gws    *gateways
	rec    *recorder
	ns     string
	label  string
	field  string
	filter watchcheck.Filter
	gw     int // the gateway of the next watch

	mu      sync.Mutex // guards everything below
	segs    []*segment
	through int64         // the newest revision seen
	hold    chan struct{} // non-nil: stop reading until it is closed
}

// segment is one watch request: what watchcheck checks, and where and
// when its events came.
type segment struct {
	watchcheck.Segment
	Gateway int
	// At are the times the events arrived, by index.
	At []time.Time
	// Relist: the segment starts at the revision of a LIST made after a
	// 410, not where the previous one ended.
	Relist bool
}

func (w *watcher) desc() string {
	return fmt.Sprintf("watcher %d (ns=%q label=%q field=%q)", w.id, w.ns, w.label, w.field)
}

func (w *watcher) run(ctx context.Context) {
	relist := false
	for ctx.Err() == nil {
		gw := w.gw
		w.gw = (w.gw + 1) % w.gws.n()
		if relist {
			rev, err := w.list(ctx, gw)
			if err != nil {
				continue
			}
			w.mu.Lock()
			w.through = rev
			w.mu.Unlock()
		}
		w.mu.Lock()
		seg := &segment{Segment: watchcheck.Segment{Start: strconv.FormatInt(w.through, 10), Began: time.Now()}, Gateway: gw, Relist: relist}
		w.segs = append(w.segs, seg)
		w.mu.Unlock()
		relist = w.watch(ctx, gw, seg)
	}
	w.mu.Lock()
	if n := len(w.segs); n > 0 {
		w.segs[n-1].Complete = true
	}
	w.mu.Unlock()
}

// list lists again after a 410 and returns the list's revision.
func (w *watcher) list(ctx context.Context, gw int) (int64, error) {
	start := time.Now()
	l, err := w.gws.client(gw).CoreV1().ConfigMaps(w.ns).List(ctx, metav1.ListOptions{LabelSelector: w.label, FieldSelector: w.field})
	w.rec.request("list", gw, start, err)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(l.ResourceVersion, 10, 64)
}

// watch runs one watch request through gateway gw until its stream ends;
// it reports whether the watcher must list again.
func (w *watcher) watch(ctx context.Context, gw int, seg *segment) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timeout := int64(3600) // streams end when a gateway does
	start := time.Now()
	wi, err := w.gws.watcher(gw).CoreV1().ConfigMaps(w.ns).Watch(wctx, metav1.ListOptions{
		ResourceVersion: seg.Start, AllowWatchBookmarks: true, LabelSelector: w.label, FieldSelector: w.field, TimeoutSeconds: &timeout,
	})
	if ctx.Err() != nil {
		return false
	}
	w.rec.request("watch", gw, start, err)
	if err != nil {
		return isGone(err)
	}
	defer wi.Stop()
	idle := time.NewTimer(watchIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-idle.C:
			return false
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return false
			}
			idle.Reset(watchIdle)
			e := watchcheck.EventOf(ev)
			now := time.Now()
			w.mu.Lock()
			seg.Events = append(seg.Events, e)
			seg.At = append(seg.At, now)
			if e.Type != "ERROR" && e.RV > w.through {
				w.through = e.RV
			}
			hold := w.hold
			w.mu.Unlock()
			if e.Type == "ERROR" {
				return e.Code == http.StatusGone
			}
			if e.Type != "BOOKMARK" {
				w.rec.delivered(gw, e.RV, now)
			}
			if hold != nil {
				select {
				case <-hold:
				case <-ctx.Done():
					return false
				}
				idle.Reset(watchIdle)
			}
		}
	}
}

// slow makes the watcher stop reading its stream until the returned
// function is called.
func (w *watcher) slow() func() {
	ch := make(chan struct{})
	w.mu.Lock()
	w.hold = ch
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.hold = nil
		w.mu.Unlock()
		close(ch)
	}
}

// at is the newest revision the watcher has seen.
func (w *watcher) at() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.through
}

func (w *watcher) segments() []*segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.segs
}
