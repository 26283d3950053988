// Package route sends a gateway's reads to the cache nodes that serve each
// range: the replicas a directory reports ready, best first, moving on to
// the next replica when one is unavailable. Window reads (watch catch-up)
// also move on when a replica's window does not reach back far enough,
// since replicas that started at different times hold different windows.
package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/storage"
)

// Replicas says which cache nodes serve a range, best first, by their read
// addresses.
type Replicas interface {
	Replicas(rangeID string) []string
}

// Static is a fixed replica set for every range: one cache node (or a few)
// without a directory.
type Static []string

// Replicas returns the static addresses.
func (s Static) Replicas(string) []string { return s }

// Router reads through the replicas of each range.
type Router struct {
	replicas Replicas
	timeout  client.Config

	mu      sync.Mutex // guards clients and closed
	clients map[string]*client.Client
	closed  bool

	// served holds, by range ID, an *atomic.Int64: the newest revision
	// this gateway has answered a read of the range at. Reads of "any"
	// revision (resourceVersion=0) are served no older than it, so that a
	// client never sees the gateway go back in time when it moves to a
	// replica that is behind (one thawed after a freeze, say).
	served sync.Map

	metrics *Metrics
}

// Config configures a Router.
type Config struct {
	Replicas Replicas
	// Client configures the client of each cache node (Addr is ignored).
	Client  client.Config
	Metrics *Metrics // optional
}

// New returns a router.
func New(cfg Config) (*Router, error) {
	if cfg.Replicas == nil {
		return nil, errors.New("cannot make router: Replicas is required")
	}
	return &Router{replicas: cfg.Replicas, timeout: cfg.Client, clients: map[string]*client.Client{}, metrics: cfg.Metrics}, nil
}

// ErrNoReplica is returned when no cache node serves a range.
var ErrNoReplica = fmt.Errorf("route: no ready replica: %w", storage.ErrNotReady)

func (r *Router) client(addr string) (*client.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("route: closed: %w", storage.ErrUnavailable)
	}
	if c, ok := r.clients[addr]; ok {
		return c, nil
	}
	cfg := r.timeout
	cfg.Addr = addr
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	r.clients[addr] = c
	return c, nil
}

// Bounds of the wait for a directory that named only replicas that no
// longer serve a range.
const (
	staleWait = 2 * time.Second
	stalePoll = 20 * time.Millisecond
)

// each calls f on the replicas of rangeID in order until f returns nil or
// an error retry does not accept; it returns the last error. When every
// replica was unavailable — during a handoff a node stops serving a range
// once its new owners are ready, and this gateway may not have heard of
// them yet — it watches the directory for up to staleWait and tries the
// replicas it names next.
func (r *Router) each(ctx context.Context, rangeID string, retry func(error) bool, f func(*client.Client) error) error {
	addrs := r.replicas.Replicas(rangeID)
	if len(addrs) == 0 {
		return fmt.Errorf("range %s: %w", rangeID, ErrNoReplica)
	}
	err := r.eachOf(ctx, rangeID, addrs, retry, f)
	if _, static := r.replicas.(Static); static || err == nil || !errors.Is(err, storage.ErrUnavailable) || !retry(err) {
		return err
	}
	t := time.NewTimer(staleWait)
	defer t.Stop()
	tick := time.NewTicker(stalePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
			return err
		case <-tick.C:
		}
		next := r.replicas.Replicas(rangeID)
		if len(next) == 0 || slices.Equal(next, addrs) {
			continue
		}
		addrs = next
		if r.metrics != nil {
			r.metrics.retries.Inc()
		}
		if err = r.eachOf(ctx, rangeID, addrs, retry, f); err == nil || !errors.Is(err, storage.ErrUnavailable) || !retry(err) {
			return err
		}
	}
}

// eachOf is each over addrs.
func (r *Router) eachOf(ctx context.Context, rangeID string, addrs []string, retry func(error) bool, f func(*client.Client) error) error {
	var err error
	for i, addr := range addrs {
		if i > 0 {
			if ctx.Err() != nil {
				// Not an answer: the replicas not asked might have one
				// (an earlier replica's "compacted" is not the range's).
				return fmt.Errorf("range %s: %w", rangeID, ctx.Err())
			}
			if r.metrics != nil {
				r.metrics.retries.Inc()
			}
		}
		c, cerr := r.client(addr)
		if cerr != nil {
			err = cerr
			continue
		}
		if err = f(c); err == nil || !retry(err) {
			return err
		}
	}
	return err
}

func unavailable(err error) bool { return errors.Is(err, storage.ErrUnavailable) }

func unavailableOrCompacted(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrCompacted)
}

// Get reads one object.
func (r *Router) Get(ctx context.Context, rangeID, key string, rd client.Read, f client.Format) (client.Object, error) {
	var out client.Object
	err := r.monotonic(ctx, rangeID, rd, func(rd client.Read, c *client.Client) error {
		var err error
		out, err = c.Get(ctx, rangeID, key, rd, f)
		if err == nil {
			// The replica had seen at least the object's revision.
			r.saw(rangeID, out.Revision)
		}
		return err
	})
	return out, err
}

// List reads one page of a list.
func (r *Router) List(ctx context.Context, rangeID string, o client.ListOptions) (*client.List, error) {
	var out *client.List
	err := r.monotonic(ctx, rangeID, o.Read, func(rd client.Read, c *client.Client) error {
		var err error
		o.Read = rd
		out, err = c.List(ctx, rangeID, o)
		if err == nil {
			r.saw(rangeID, out.Revision)
		}
		return err
	})
	return out, err
}

// monotonic runs read on the replicas of rangeID in turn. A read that
// waits for a revision — a consistent one, or one of "any" revision
// raised to the range's served revision — asks the first replica with a
// short wait (replication lag is milliseconds), then each of the others
// whether it has the revision already, and only then gives the first its
// full wait: a replica that is behind (frozen, cut off from NATS) is
// passed over for one that is up to date. When none gets there, a read of
// "any" revision is served as the first replica has it (an old answer
// rather than none), counted, and the range's served revision starts
// again from what was served.
func (r *Router) monotonic(ctx context.Context, rangeID string, rd client.Read, read func(client.Read, *client.Client) error) error {
	try := func(rd client.Read) func(*client.Client) error {
		return func(c *client.Client) error { return read(rd, c) }
	}
	floored := r.floor(rangeID, rd)
	if floored.ResourceVersion == 0 || floored.Match == exact {
		return r.each(ctx, rangeID, unavailable, try(rd))
	}
	first, seen := floored, floored
	first.Wait, seen.Wait = catchUpWait, time.Millisecond
	asked := 0
	err := r.each(ctx, rangeID, unavailableOrBehind, func(c *client.Client) error {
		asked++
		if asked == 1 {
			return read(first, c)
		}
		return read(seen, c)
	})
	if errors.Is(err, storage.ErrRevisionTooLarge) && ctx.Err() == nil {
		err = r.each(ctx, rangeID, unavailable, try(floored))
	}
	if floored == rd || !errors.Is(err, storage.ErrRevisionTooLarge) || ctx.Err() != nil {
		return err
	}
	if r.metrics != nil {
		r.metrics.behind.Inc()
	}
	if v, ok := r.served.Load(rangeID); ok {
		v.(*atomic.Int64).Store(0) // read raises it to what it serves
	}
	return r.each(ctx, rangeID, unavailable, try(rd))
}

// catchUpWait is how long the first replica is given to reach a revision
// before the others are asked whether they have it.
const catchUpWait = 50 * time.Millisecond

const exact = "Exact"

// floor raises a read of "any" revision to the range's served revision.
func (r *Router) floor(rangeID string, rd client.Read) client.Read {
	if rd.ResourceVersion != 0 || rd.Match != "" {
		return rd
	}
	v, ok := r.served.Load(rangeID)
	if !ok {
		return rd
	}
	if rev := v.(*atomic.Int64).Load(); rev > 0 {
		return client.Read{ResourceVersion: rev, Match: notOlderThan}
	}
	return rd
}

const notOlderThan = "NotOlderThan"

// saw raises the range's served revision to rev.
func (r *Router) saw(rangeID string, rev int64) {
	v, ok := r.served.Load(rangeID)
	if !ok {
		v, _ = r.served.LoadOrStore(rangeID, new(atomic.Int64))
	}
	hw := v.(*atomic.Int64)
	for {
		cur := hw.Load()
		if rev <= cur || hw.CompareAndSwap(cur, rev) {
			return
		}
	}
}

func unavailableOrBehind(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrRevisionTooLarge)
}

// Events reads a range's window after since. A replica whose window does
// not reach back to since is passed over for one that does: only when
// none has it is the answer storage.ErrCompacted.
func (r *Router) Events(ctx context.Context, rangeID string, since int64) ([]event.Event, int64, error) {
	var (
		evs  []event.Event
		seen int64
	)
	compacted := false
	err := r.each(ctx, rangeID, unavailableOrCompacted, func(c *client.Client) error {
		var err error
		evs, seen, err = c.Events(ctx, rangeID, since)
		if errors.Is(err, storage.ErrCompacted) {
			compacted = true
		}
		return err
	})
	if err != nil && compacted && errors.Is(err, storage.ErrUnavailable) {
		// One replica had lost the revision, the others were down: the
		// revision is gone as far as anyone can tell now.
		return nil, 0, fmt.Errorf("range %s: no replica holds revision %d: %w", rangeID, since, storage.ErrCompacted)
	}
	return evs, seen, err
}

// Ready reports whether each of rangeIDs has a replica, as far as the
// directory knows; with static replicas it asks each of them whether it
// serves those ranges synced.
func (r *Router) Ready(ctx context.Context, rangeIDs []string) error {
	if len(rangeIDs) == 0 {
		return nil
	}
	for _, id := range rangeIDs {
		if len(r.replicas.Replicas(id)) == 0 {
			return fmt.Errorf("range %s: %w", id, ErrNoReplica)
		}
	}
	if s, ok := r.replicas.(Static); ok {
		for _, addr := range s {
			c, err := r.client(addr)
			if err != nil {
				return err
			}
			if err := c.Ready(ctx, rangeIDs...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the clients.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, c := range r.clients {
		c.Close()
	}
	clear(r.clients)
	return nil
}
