package rest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime/debug"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/stream"
	"github.com/kgate/kgate/gateway/internal/watchhub"
)

// initialEventsEnd annotates the bookmark that ends a WatchList's initial
// events.
const initialEventsEnd = "k8s.io/initial-events-end"

// watchPlan is everything a watch needs once its connection is hijacked:
// nothing may refer to the fasthttp request any more.
type watchPlan struct {
	r    request // rc is nil after the hijack
	opts *listOptions
	// cacheOpts are the options the cache nodes read the initial state
	// with: opts, without the selectors when the gateway applies them
	// to served objects (selectServed).
	cacheOpts    *listOptions
	selectServed bool
	rangeIDs     []string // in key order; several are merged in revision order
	filter       watchhub.Filter
	initial      bool // send the current state as ADDED events first
	endMark      bool // ...then a bookmark annotated initialEventsEnd
	first        *listPage
	read         client.Read
	since        int64 // without initial events: watch from here
	timeout      time.Duration
	format       client.Format
	resource     string
	// auditID is the Audit-Id response header the gateway set before
	// routing; the stream writes its own headers, so it is carried here.
	auditID string
}

func (h *Handler) watch(r *request) error {
	if h.base.Err() != nil {
		// Shutting down: the watch hub is closing, and an ERROR event in
		// a 200 stream would make an informer relist. Like kube-apiserver
		// with --shutdown-send-retry-after: 429, Retry-After and
		// Connection: close send the client to another gateway, where
		// client-go resumes the watch.
		r.rc.SetConnectionClose()
		return apierror.TooManyRequests("the gateway is shutting down, please try again later", 1)
	}
	m, err := negotiate.Negotiate(string(r.rc.Request.Header.Peek("Accept")), negotiate.Endpoint{Resource: true, Protobuf: !r.res.Unstructured(), Watch: true})
	if err != nil {
		return err
	}
	r.media = m
	o, err := parseListOptions(r.rc.QueryArgs(), r.res, true)
	if err != nil {
		return err
	}
	if r.info.Name != "" {
		// A watch of one object (legacy /watch/.../name paths) is a watch
		// of the collection selected by name.
		byName := fields.OneTermEqualSelector("metadata.name", r.info.Name)
		if o.fields.Empty() {
			o.fields = byName
		} else {
			o.fields = fields.AndSelectors(o.fields, byName)
		}
		o.fieldSelector = o.fields.String()
	}
	prefix := r.res.ListPrefix(r.info.Namespace)
	rngs := h.cfg.Ranges.Current().Intersecting(prefix)
	if len(rngs) == 0 {
		return fmt.Errorf("cannot find a range for prefix %q: %w", prefix, ErrNotFoundPath)
	}
	p := &watchPlan{
		r:        *r,
		opts:     o,
		filter:   watchhub.Filter{Namespace: r.info.Namespace, Labels: o.labels, Fields: o.fields},
		format:   cacheFormat(m),
		resource: r.res.Resource,
	}
	for _, rng := range rngs {
		p.rangeIDs = append(p.rangeIDs, rng.ID)
	}
	p.cacheOpts = o
	if h.selectsServed(r.res, o) {
		// The cache nodes and the hub select on stored objects: here
		// they only narrow by namespace, and each event is selected
		// once converted (watchEncoder.selected).
		p.selectServed = true
		p.filter.Labels, p.filter.Fields = nil, nil
		unselected := *o
		unselected.labelSelector, unselected.fieldSelector = "", ""
		unselected.labels, unselected.fields = labels.Everything(), fields.Everything()
		p.cacheOpts = &unselected
	}
	p.auditID = string(r.rc.Response.Header.Peek(HeaderAuditID))
	p.r.rc = nil
	p.r.info = copyInfo(r)
	switch {
	case o.sendInitialEvents != nil:
		p.initial, p.endMark = *o.sendInitialEvents, *o.sendInitialEvents
	case o.resourceVersion == "" || o.resourceVersion == "0":
		p.initial = true // legacy: the state as ADDED events, then changes
	}
	p.timeout = h.watchTimeout(o.timeout)

	ctx, cancel := context.WithTimeout(h.base, h.cfg.RequestTimeout)
	defer cancel()
	if p.initial {
		// Read the first page now: a failure is still an ordinary error
		// response.
		if p.read, err = h.readFor(ctx, o.resourceVersion, o.rv, metav1.ResourceVersionMatchNotOlderThan); err != nil {
			return err
		}
		if p.first, err = h.readList(ctx, &p.r, p.cacheOpts, p.read, "", h.cfg.ListPageSize, p.format); err != nil {
			if errors.Is(err, client.ErrBadRequest) {
				return apierror.BadRequest(err.Error())
			}
			return err
		}
	} else {
		p.since = o.rv
	}
	r.rc.HijackSetNoResponse(true)
	// Counted now, while fasthttp's Shutdown still waits for this
	// handler: it does not wait for the hijacked connection.
	h.streams.Admit()
	r.rc.Hijack(func(c net.Conn) {
		h.streams.Attach(c)
		defer h.streams.End(c)
		defer h.cfg.Metrics.longRunningWatch(p.r.info)()
		h.streamWatch(c, p)
	})
	return nil
}

// cutWait is how long WaitWatches waits, after closing their connections,
// for watches that did not end in time.
const cutWait = time.Second

// WaitWatches waits until every watch stream has ended, after base was
// cancelled (each then ends with a last bookmark when it asked for
// bookmarks). When ctx ends first it closes their connections, so that a
// write blocked on a client that reads nothing fails, and waits a little
// longer; it returns an error when some still run then.
func (h *Handler) WaitWatches(ctx context.Context) error {
	cut, running := h.streams.Drain(ctx, cutWait)
	if running > 0 {
		return fmt.Errorf("cannot end watch streams: %d still run", running)
	}
	if cut > 0 {
		h.cfg.Logger.Warn("watch streams cut at shutdown", "streams", cut)
	}
	return nil
}

// progressWait bounds how long a bookmark waits for a merged watch's
// ranges to say how far they are complete.
const progressWait = 200 * time.Millisecond

// freshLast is the revision a bookmark can carry: a merged watch first
// asks its quiet ranges how far they are complete (it does not follow
// them while nothing waits on them), so that a watch with few matching
// events still resumes from a recent revision.
func freshLast(ctx context.Context, w watchhub.Stream) int64 {
	if p, ok := w.(interface{ Progress(context.Context) error }); ok {
		pctx, cancel := context.WithTimeout(ctx, progressWait)
		_ = p.Progress(pctx)
		cancel()
	}
	return w.Last()
}

func copyInfo(r *request) *requestinfo.Info {
	c := *r.info
	return &c
}

func (h *Handler) watchTimeout(seconds int64) time.Duration {
	if seconds > 0 {
		return time.Duration(seconds) * time.Second
	}
	min := h.cfg.MinWatchTimeout
	return min + time.Duration(rand.Int64N(int64(min)))
}

// streamWatch runs on the hijacked connection until the watch ends.
func (h *Handler) streamWatch(conn net.Conn, p *watchPlan) {
	defer func() {
		// fasthttp does not recover hijack handlers: a bug here must end
		// this watch, not the gateway.
		if v := recover(); v != nil {
			h.cfg.Logger.Error("panic in watch", "resource", p.resource, "panic", v, "stack", string(debug.Stack()))
			conn.Close()
		}
	}()
	headers := []stream.Header{{Name: "Content-Type", Value: p.r.media.ContentType()}}
	if p.auditID != "" {
		headers = append(headers, stream.Header{Name: HeaderAuditID, Value: p.auditID})
	}
	s, err := stream.Start(conn, h.cfg.WatchWriteTimeout, headers...)
	if err != nil {
		conn.Close()
		return
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(h.base)
	gone := make(chan struct{})
	defer func() {
		cancel()
		<-gone
	}()
	go func() {
		defer close(gone)
		select {
		case <-s.Gone():
			cancel()
		case <-ctx.Done():
		}
	}()
	enc := &watchEncoder{h: h, r: &p.r, sent: h.cfg.Metrics.watchCounter(p.r.info)}
	since := p.since
	if p.initial {
		rev, err := h.sendInitial(ctx, s, enc, p)
		if err != nil {
			h.sendError(s, enc, err)
			return
		}
		since = rev
	}
	w, err := h.cfg.Hub.WatchRanges(p.rangeIDs, since, p.filter)
	if errors.Is(err, watchhub.ErrRangeRemoved) {
		return // the resource went away meanwhile: end as below
	}
	if err != nil {
		if h.base.Err() != nil {
			// Admitted just before shutdown began, and the hub has
			// closed since: end as every watch ends at shutdown, with a
			// bookmark the client resumes from elsewhere (it has seen
			// everything through since), not with an ERROR that would
			// make an informer relist.
			switch {
			case p.endMark:
				_ = h.sendBookmark(s, enc, since, true)
			case p.opts.bookmark:
				_ = h.sendBookmark(s, enc, since, false)
			}
			return
		}
		h.sendError(s, enc, err)
		return
	}
	defer w.Close()
	if p.endMark {
		if err := h.sendBookmark(s, enc, w.Last(), true); err != nil {
			return
		}
	}
	deadline := time.Now().Add(p.timeout)
	nextBookmark := time.Now().Add(h.cfg.BookmarkInterval)
	// Waits end at the next bookmark or at the watch's end: one context
	// serves every wait until then, not one per event.
	wait := &waitUntil{parent: ctx}
	defer wait.reset()
	var frames [][]byte
	for {
		wake := nextBookmark
		if deadline.Before(wake) {
			wake = deadline
		}
		d, err := w.Next(wait.until(wake))
		if err != nil {
			wait.reset()
			h.cfg.Logger.Debug("watch wakes", "resource", p.resource, "err", err, "last", w.Last())
			switch {
			case h.base.Err() != nil:
				// Shutting down: a last bookmark lets the client resume
				// elsewhere without a relist.
				if p.opts.bookmark {
					_ = h.sendBookmark(s, enc, freshLast(ctx, w), false)
				}
				return
			case ctx.Err() != nil:
				return // the client went away
			case errors.Is(err, watchhub.ErrRangeRemoved):
				// The resource was removed: like kube-apiserver for a
				// deleted custom resource, the watch just ends; the
				// client's next request gets 404.
				return
			case errors.Is(err, context.DeadlineExceeded):
				now := time.Now()
				if !now.Before(deadline) {
					if p.opts.bookmark {
						_ = h.sendBookmark(s, enc, freshLast(ctx, w), false)
					}
					return
				}
				// Like kube-apiserver's watch cache, no periodic bookmark
				// until the range is past where the watch started: not
				// one at a future resourceVersion etcd has not reached.
				if last := freshLast(ctx, w); p.opts.bookmark && last > since {
					if err := h.sendBookmark(s, enc, last, false); err != nil {
						return
					}
				}
				nextBookmark = now.Add(h.cfg.BookmarkInterval)
				continue
			}
			h.sendError(s, enc, err)
			return
		}
		// What piled up while the last write went out goes in this one:
		// one chunk, one flush.
		frames = frames[:0]
		size := 0
		for {
			frame, err := enc.frame(d, p)
			if err != nil {
				h.cfg.Logger.Error("cannot encode watch event", "resource", p.resource, "err", err)
				if s.WriteFrames(frames...) == nil {
					h.sendError(s, enc, err)
				}
				return
			}
			if frame != nil { // nil: not selected once converted
				// Counted before the write, as kube-apiserver does, so
				// that a client that has read the event also sees it
				// counted.
				enc.sent.sent(len(frame))
				frames = append(frames, frame)
				size += len(frame)
			}
			var ok bool
			if size >= maxWatchWrite {
				break
			}
			if d, ok = w.Ready(); !ok {
				break
			}
		}
		err = s.WriteFrames(frames...)
		clear(frames) // hold no event while waiting for the next
		if err != nil {
			return
		}
	}
}

// waitUntil is the context a watch waits in until a wake time: made
// once, and again only after it ended (reset).
type waitUntil struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
}

// until returns the context; wake applies when it is made.
func (w *waitUntil) until(wake time.Time) context.Context {
	if w.ctx == nil {
		w.ctx, w.cancel = context.WithDeadline(w.parent, wake)
	}
	return w.ctx
}

func (w *waitUntil) reset() {
	if w.cancel != nil {
		w.cancel()
		w.ctx, w.cancel = nil, nil
	}
}

// maxWatchWrite bounds the frames one write to a watch client gathers.
const maxWatchWrite = 256 << 10

// sendInitial streams the state at the plan's read as ADDED events, page by
// page at one revision, and returns that revision.
func (h *Handler) sendInitial(ctx context.Context, s *stream.Stream, enc *watchEncoder, p *watchPlan) (int64, error) {
	page := p.first
	p.first = nil
	for {
		frames, err := h.initialFrames(enc, p, page)
		if err != nil {
			return 0, err
		}
		if err := s.Write(frames); err != nil {
			return 0, err
		}
		if page.lastKey == "" {
			return page.revision, nil
		}
		read := client.Read{ResourceVersion: page.revision, Match: string(metav1.ResourceVersionMatchExact)}
		next, err := h.readList(ctx, &p.r, p.cacheOpts, read, page.lastKey, h.cfg.ListPageSize, p.format)
		if err != nil {
			return 0, err
		}
		page = next
	}
}

// initialFrames frames one page of the initial state as ADDED events;
// with selectServed, the page's objects are converted together and
// selected here.
func (h *Handler) initialFrames(enc *watchEncoder, p *watchPlan, page *listPage) ([]byte, error) {
	var frames []byte
	if !p.selectServed {
		for _, item := range page.items {
			f, err := enc.item(watch.Added, item, p.format)
			if err != nil {
				return nil, err
			}
			frames = append(frames, f...)
			enc.sent.sent(len(f))
		}
		return frames, nil
	}
	objs, err := h.decodeServedList(p.r.res, page.items)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		ok, err := h.matches(&p.r, obj, p.opts.labels, p.opts.fields)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		f, err := enc.object(watch.Added, obj)
		if err != nil {
			return nil, err
		}
		frames = append(frames, f...)
		enc.sent.sent(len(f))
	}
	return frames, nil
}

func (h *Handler) sendBookmark(s *stream.Stream, enc *watchEncoder, rev int64, initialEnd bool) error {
	f, err := enc.bookmark(rev, initialEnd)
	if err != nil {
		return err
	}
	return s.Write(f)
}

// sendError ends a watch with an ERROR event carrying the Status of err,
// as kube-apiserver does for a resourceVersion that is too old.
func (h *Handler) sendError(s *stream.Stream, enc *watchEncoder, err error) {
	st := apierror.Status(err, enc.r.res.GVR().GroupResource(), "")
	f, encErr := enc.status(st)
	if encErr != nil {
		h.cfg.Logger.Error("cannot encode watch error", "err", encErr)
		return
	}
	_ = s.Write(f)
}
