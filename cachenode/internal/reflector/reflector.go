// Package reflector keeps the store and the window of one range in step
// with etcd: it lists the range at a revision R0, then watches from R0+1
// with previous values and progress notifications, turning every etcd
// event into an event.Event that it applies to the store and the window
// and hands to a sink (the NATS publisher), in revision order.
package reflector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/cachenode/internal/window"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sink receives what a reflector sees, from the reflector's goroutine and
// in order. It must not block for long.
type Sink interface {
	// Event is called for every change, after the store and the window
	// have it. ev must not be kept after the call returns.
	Event(ev *event.Event)
	// Seen is called when the range is known complete up to rev with no
	// new event (an etcd progress notification, or a new list).
	Seen(rangeID string, rev int64)
	// Restart is called when the reflector (re)lists at revision from: the
	// event chain starts again there.
	Restart(rangeID string, from int64)
}

// Config configures a reflector.
type Config struct {
	Etcd     *clientv3.Client   // required
	Range    *ranges.Range      // required
	Registry *registry.Registry // required
	Codec    *codec.Codec       // required
	Window   window.Config
	// PageSize is the number of keys per page of the initial list;
	// default 500.
	PageSize int64
	// ProgressInterval: when no event came for this long, ask etcd for a
	// progress notification so that the seen revision advances on a quiet
	// range. Default 1s.
	ProgressInterval time.Duration
	// StallAfter: when the watch brought nothing (no event, no progress
	// notification) for this long although progress was asked for every
	// ProgressInterval and etcd's revision moved past the seen one, the
	// range is stalled: Stalled reports it, and the watch is started
	// again from the seen revision. Default 30s, and at least three
	// ProgressIntervals.
	StallAfter time.Duration
	// ConsistencyInterval is how often the range's keys and mod
	// revisions are compared with etcd's at the same revision
	// (checkConsistency); a difference relists the range. Default 5m; a
	// random part of up to a tenth is added to each wait.
	ConsistencyInterval time.Duration
	// WaitRetry is how often WaitFor asks etcd for progress again while
	// waiting (etcd drops a request made while the watch catches up).
	// Default 50ms.
	WaitRetry time.Duration
	// MaxRewind is the most window events undone to serve an exact
	// revision; beyond, the read fails with storage.ErrCompacted.
	// Default 20,000.
	MaxRewind int
	// EagerProtobuf computes the protobuf form of each object when it is
	// stored (from the decoded object, cheap) instead of on first use
	// (from the JSON, dear). Worth it when most reads ask for protobuf.
	EagerProtobuf bool
	// Transformers decrypt stored values (--encryption-provider-config);
	// nil reads them as they are.
	Transformers *encryption.Transformers
	// Sink receives events; nil drops them.
	Sink Sink
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics; nil records nothing.
	Metrics *Metrics
}

func (c *Config) setDefaults() error {
	if c.Etcd == nil || c.Range == nil || c.Registry == nil || c.Codec == nil {
		return errors.New("cannot make reflector: Etcd, Range, Registry and Codec are required")
	}
	if c.PageSize < 0 || c.ProgressInterval < 0 || c.StallAfter < 0 || c.ConsistencyInterval < 0 || c.WaitRetry < 0 || c.MaxRewind < 0 {
		return fmt.Errorf("cannot make reflector for %s: negative setting", c.Range.ID)
	}
	if c.PageSize == 0 {
		c.PageSize = 500
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = time.Second
	}
	if c.StallAfter == 0 {
		c.StallAfter = 30 * time.Second
	}
	c.StallAfter = max(c.StallAfter, 3*c.ProgressInterval)
	if c.ConsistencyInterval == 0 {
		c.ConsistencyInterval = 5 * time.Minute
	}
	if c.WaitRetry == 0 {
		c.WaitRetry = 50 * time.Millisecond
	}
	if c.MaxRewind == 0 {
		c.MaxRewind = 20_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Sink == nil {
		c.Sink = nopSink{}
	}
	return nil
}

type nopSink struct{}

func (nopSink) Event(*event.Event)    {}
func (nopSink) Seen(string, int64)    {}
func (nopSink) Restart(string, int64) {}

// state is what one list and the watch after it build; a relist replaces
// it whole, so readers always see a store and a window that agree.
type state struct {
	store *store.Store
	win   *window.Ring
	// skipped are the keys the list left out because their values did
	// not decode, with their mod revisions: the consistency checker
	// leaves them out of etcd's digest too. Read-only after the list.
	skipped map[string]int64
}

// Reflector mirrors one range. Run it once; read it from any goroutine.
type Reflector struct {
	cfg   Config
	rng   *ranges.Range
	log   *slog.Logger
	m     rangeMetrics
	dec   *decoder
	state atomic.Pointer[state] // nil until the first list

	mu       sync.Mutex // guards seen, seenCh, waiting
	seen     int64
	seenCh   chan struct{} // closed when seen advances and waiting is set
	waiting  bool
	progress chan struct{} // capacity 1: a progress request is wanted
	relist   chan struct{} // capacity 1: the consistency checker found a difference
	// inconsistent: the checker found a difference; cleared by the next
	// list.
	inconsistent atomic.Bool
	// heard is when etcd last answered (a list finished, a watch
	// response) or was found still at the seen revision, in Unix
	// nanoseconds.
	heard atomic.Int64

	rewindMu sync.Mutex // guards rewound
	rewound  []rewound  // the last snapshots made by At, newest last

	// chain state, used by the Run goroutine only
	lastRev int64 // revision of the last complete revision's events (or the list)
	listRev int64 // revision of the last list: where event chains start
	subject map[string]int64

	afterList func(rev int64) // test hook: runs between list and watch
}

type rewound struct {
	st   *state
	snap *store.Snapshot
}

const rewoundKept = 4

// New returns a reflector for cfg.Range.
func New(cfg Config) (*Reflector, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if _, err := window.New(cfg.Window, 0); err != nil {
		return nil, fmt.Errorf("cannot make reflector for %s: %w", cfg.Range.ID, err)
	}
	dec, err := newDecoder(cfg.Range, cfg.Registry, cfg.Codec, cfg.EagerProtobuf, cfg.Transformers)
	if err != nil {
		return nil, fmt.Errorf("cannot make reflector for %s: %w", cfg.Range.ID, err)
	}
	return &Reflector{
		cfg:      cfg,
		rng:      cfg.Range,
		log:      cfg.Logger.With("range", cfg.Range.ID),
		m:        cfg.Metrics.forRange(cfg.Range.ID),
		dec:      dec,
		seenCh:   make(chan struct{}),
		progress: make(chan struct{}, 1),
		relist:   make(chan struct{}, 1),
	}, nil
}

// Range returns the range reflected.
func (r *Reflector) Range() *ranges.Range { return r.rng }

// Ready reports whether the first list is done.
func (r *Reflector) Ready() bool { return r.state.Load() != nil }

// Stalled reports whether the synced range has heard nothing from etcd
// for longer than StallAfter, and for how long it has not.
func (r *Reflector) Stalled() (time.Duration, bool) {
	if !r.Ready() {
		return 0, false // not synced: reported as such
	}
	quiet := time.Since(time.Unix(0, r.heard.Load()))
	return quiet, quiet > r.cfg.StallAfter
}

// Seen returns the revision the range is complete up to.
func (r *Reflector) Seen() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// Snapshot returns the current state, or storage.ErrUnavailable before
// the first list.
func (r *Reflector) Snapshot() (*store.Snapshot, error) {
	st := r.state.Load()
	if st == nil {
		return nil, fmt.Errorf("range %s not synced: %w", r.rng.ID, storage.ErrUnavailable)
	}
	return st.store.Snapshot(), nil
}

// Since appends to dst the events after rev (see window.Ring.Since).
func (r *Reflector) Since(rev int64, dst []*window.Item, maxBytes int64) ([]*window.Item, int64, error) {
	st := r.state.Load()
	if st == nil {
		return dst, 0, fmt.Errorf("range %s not synced: %w", r.rng.ID, storage.ErrUnavailable)
	}
	return st.win.Since(rev, dst, maxBytes)
}

// At returns the state at exactly rev, rewinding the current state with
// the window. It fails with storage.ErrCompacted when the window does not
// reach back to rev and with storage.ErrRevisionTooLarge when rev was not
// seen yet (call WaitFor first).
func (r *Reflector) At(rev int64) (*store.Snapshot, error) {
	st := r.state.Load()
	if st == nil {
		return nil, fmt.Errorf("range %s not synced: %w", r.rng.ID, storage.ErrUnavailable)
	}
	snap := st.store.Snapshot()
	if rev > snap.Revision {
		return nil, fmt.Errorf("cannot read range %s at %d: seen %d: %w", r.rng.ID, rev, snap.Revision, storage.ErrRevisionTooLarge)
	}
	if rev == snap.Revision {
		return snap, nil
	}
	r.rewindMu.Lock()
	for _, rw := range r.rewound {
		if rw.st == st && rw.snap.Revision == rev {
			r.rewindMu.Unlock()
			return rw.snap, nil
		}
	}
	r.rewindMu.Unlock()
	changes, err := st.win.Changes(rev, snap.Revision, nil, r.cfg.MaxRewind)
	if err != nil {
		return nil, fmt.Errorf("cannot read range %s at %d: %w", r.rng.ID, rev, err)
	}
	back := snap.Rewind(rev, changes)
	if len(changes) > 0 {
		r.rewindMu.Lock()
		if len(r.rewound) == rewoundKept {
			r.rewound = append(r.rewound[:0], r.rewound[1:]...)
		}
		r.rewound = append(r.rewound, rewound{st, back})
		r.rewindMu.Unlock()
	}
	return back, nil
}

// WaitFor blocks until the range has seen rev, asking etcd for progress
// while it waits so that a quiet range catches up at once.
func (r *Reflector) WaitFor(ctx context.Context, rev int64) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		r.mu.Lock()
		if r.seen >= rev {
			r.mu.Unlock()
			return nil
		}
		r.waiting = true
		ch := r.seenCh
		r.mu.Unlock()
		r.RequestProgress()
		if timer == nil {
			timer = time.NewTimer(r.cfg.WaitRetry)
		} else {
			timer.Reset(r.cfg.WaitRetry)
		}
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("cannot wait for revision %d on range %s: %w", rev, r.rng.ID, ctx.Err())
		}
	}
}

// RequestProgress asks the Run goroutine for an etcd progress request,
// without blocking; requests made while one is pending are one request.
// The notification's revision reaches the Sink through Seen. etcd answers
// once the watch is caught up, with the revision it had then.
func (r *Reflector) RequestProgress() {
	select {
	case r.progress <- struct{}{}:
	default:
	}
}

// advance records that the range is complete up to rev.
func (r *Reflector) advance(rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev <= r.seen {
		return
	}
	r.seen = rev
	r.m.seen.Set(float64(rev))
	if r.waiting {
		close(r.seenCh)
		r.seenCh = make(chan struct{})
		r.waiting = false
	}
}

// setBase tells the window's budget what the store holds now.
func (st *state) setBase() {
	_, bytes := st.store.Stats()
	st.win.SetBase(bytes)
}
