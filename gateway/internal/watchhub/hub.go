package watchhub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/storage/ranges"
)

// Source reads a range's window on a cache node: the events after since,
// and the revision the range has seen. storage.ErrCompacted when since is
// older than the window.
type Source interface {
	Events(ctx context.Context, rangeID string, since int64) ([]event.Event, int64, error)
}

// Config configures a Hub.
type Config struct {
	NATS   *nats.Conn
	Source Source
	Logger *slog.Logger
	// QueueLen bounds each watcher's queue of undelivered events; a
	// watcher whose queue overflows catches up from the window. Default
	// 1024.
	QueueLen int
	// FeedBuffer bounds the NATS messages a feed holds before NATS drops
	// them (treated as a gap). Default 65536.
	FeedBuffer int
	// Linger keeps a feed without watchers subscribed this long, so a
	// watcher that reconnects finds it warm. Default 30s.
	Linger time.Duration
	// RepairTimeout bounds one window read. Default 10s.
	RepairTimeout time.Duration
	Metrics       *Metrics // optional
	// Ranges is the range table; optional. When set, the hub follows it:
	// a range that leaves the table (its resource was removed) ends its
	// watchers with ErrRangeRemoved and drops its NATS subscription, and
	// no new watch starts on it. Nil watches any range id.
	Ranges ranges.Source
}

func (c *Config) validate() error {
	if c.NATS == nil || c.Source == nil || c.Logger == nil {
		return errors.New("cannot make watch hub: NATS, Source and Logger are required")
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 1024
	}
	if c.FeedBuffer <= 0 {
		c.FeedBuffer = 65536
	}
	if c.Linger <= 0 {
		c.Linger = 30 * time.Second
	}
	if c.RepairTimeout <= 0 {
		c.RepairTimeout = 10 * time.Second
	}
	return nil
}

// Hub owns the feeds of one gateway.
type Hub struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards feeds and closed
	feeds  map[string]*feed
	closed bool
}

// New returns a hub; Close stops it.
func New(cfg Config) (*Hub, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{cfg: cfg, ctx: ctx, cancel: cancel, feeds: map[string]*feed{}}
	if cfg.Ranges != nil {
		h.wg.Go(h.follow)
	}
	return h, nil
}

// ErrClosed is returned by Watch after Close.
var ErrClosed = errors.New("watchhub: closed")

// ErrRangeRemoved ends the watchers of a range that left the range table,
// as kube-apiserver ends the watches of a deleted custom resource; it is
// also returned by a Watch on such a range.
var ErrRangeRemoved = errors.New("watchhub: range removed")

// follow ends the feeds of the ranges that leave the table until the hub
// closes.
func (h *Hub) follow() {
	for {
		changed := h.cfg.Ranges.Changed()
		t := h.cfg.Ranges.Current()
		h.mu.Lock()
		for id, f := range h.feeds {
			if _, ok := t.ByID(id); !ok {
				delete(h.feeds, id)
				f.end(fmt.Errorf("cannot watch range %s: %w", id, ErrRangeRemoved))
			}
		}
		h.mu.Unlock()
		select {
		case <-changed:
		case <-h.ctx.Done():
			return
		}
	}
}

func (h *Hub) feed(rangeID string, since int64) (*feed, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.cfg.Ranges != nil {
		// Checked under mu, which follow holds while it ends feeds: a
		// feed is either refused here or ended there.
		if _, ok := h.cfg.Ranges.Current().ByID(rangeID); !ok {
			return nil, fmt.Errorf("cannot watch range %s: %w", rangeID, ErrRangeRemoved)
		}
	}
	if f, ok := h.feeds[rangeID]; ok {
		return f, nil
	}
	f, err := startFeed(h, rangeID, since)
	if err != nil {
		return nil, fmt.Errorf("cannot watch range %s: %w", rangeID, err)
	}
	h.feeds[rangeID] = f
	return f, nil
}

// forget removes f if it is still the feed of its range.
func (h *Hub) forget(f *feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.feeds[f.rangeID] == f {
		delete(h.feeds, f.rangeID)
	}
}

// Close ends every feed and watcher and waits for their goroutines.
func (h *Hub) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	return nil
}

// Feeds returns the number of live feeds, for metrics and tests.
func (h *Hub) Feeds() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}
