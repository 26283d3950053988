// Package cachenode is the cache node: for each range of the range table a
// reflector keeps an ordered store and a window of recent events in step
// with etcd; every event is published once on NATS; an internal HTTP read
// API serves gets, lists and event catch-up from memory. Gateways read it
// through cachenode/client and subscribe to the subjects of
// cachenode/event.
package cachenode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/health"
	"github.com/kgate/kgate/cachenode/internal/publisher"
	"github.com/kgate/kgate/cachenode/internal/readapi"
	"github.com/kgate/kgate/cachenode/internal/reflector"
	"github.com/kgate/kgate/cachenode/internal/window"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WindowConfig bounds the event window of each range. Zero fields take
// the defaults: 100,000 events, 256 MiB, 5 minutes per range; and for all
// the ranges of the node together a tenth (NodeShare) of the bytes the
// node's stores hold, at least 64 MiB (NodeMinBytes) and at most 1 GiB
// (NodeMaxBytes): past it the oldest events of every range go first.
// Bytes are those only the windows keep alive (superseded and deleted
// versions). NodeMinBytes = NodeMaxBytes bounds them by that alone.
type WindowConfig struct {
	MaxEvents    int
	MaxBytes     int64
	MaxAge       time.Duration
	NodeMaxBytes int64
	NodeMinBytes int64
	NodeShare    float64
}

// Config configures a cache node.
type Config struct {
	Etcd     *clientv3.Client   // required
	NATS     *nats.Conn         // required
	Registry *registry.Registry // required
	Codec    *codec.Codec       // required
	Ranges   ranges.Source      // required: the ranges a node may reflect (a fixed table or a Follower)
	// Listen is the read API's address; default "127.0.0.1:0" (a free
	// port, see Addr).
	Listen string
	// TLS, when set, serves the read API over TLS with it (see
	// pki.InternalTLS.Server: only gateways and cache nodes get in).
	TLS *tls.Config
	// Window bounds each range's event window.
	Window WindowConfig
	// ProgressInterval: an idle range publishes progress, and asks etcd
	// for it, after this long. Default 1s.
	ProgressInterval time.Duration
	// StallAfter: a range whose etcd watch brought nothing (no event, no
	// progress notification) for this long although progress was asked
	// for is stalled: /readyz fails on it and its watch starts again.
	// Default 30s.
	StallAfter time.Duration
	// WaitTimeout bounds a read's wait for a revision (then
	// storage.ErrRevisionTooLarge). Default 3s.
	WaitTimeout time.Duration
	// Transformers decrypt stored values (--encryption-provider-config);
	// nil reads them as they are.
	Transformers *encryption.Transformers
	// EagerProtobuf encodes each object version as protobuf when stored,
	// rather than on its first protobuf read.
	EagerProtobuf bool
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics registers the node's metrics; nil registers none.
	Metrics prometheus.Registerer
	// Placement chooses the ranges to reflect and publish; nil reflects
	// and publishes every range of Ranges (a lone node).
	Placement Placement
	// PublishFilter is for fault-injection tests only: returning false
	// for an event (or a progress message) drops its NATS message, as a
	// lost message; the event stays in the window. Nil publishes all.
	PublishFilter func(*event.Event) bool
}

// Placement decides which ranges of the table a node reflects, and for
// which of them it is the primary, the one replica that publishes events.
// It is consulted whenever Changes fires and once a second.
type Placement interface {
	// Wants reports whether the node should reflect rangeID; ready says
	// whether it already serves the range (a node keeps a range it no
	// longer owns until the new owners are ready).
	Wants(rangeID string, ready bool) bool
	// Primary reports whether the node publishes rangeID; ready says
	// whether the node serves it.
	Primary(rangeID string, ready bool) bool
	// Changes fires when membership or readiness changed.
	Changes() <-chan struct{}
}

// everything is the placement of a lone node: every range, always primary.
type everything struct{}

func (everything) Wants(string, bool) bool   { return true }
func (everything) Primary(string, bool) bool { return true }
func (everything) Changes() <-chan struct{}  { return nil }

// Node is a cache node.
type Node struct {
	cfg Config
	log *slog.Logger
	m   *metrics
	// budget bounds the windows of every range together.
	budget *window.Budget
	pub    *publisher.Publisher
	api    *readapi.Server

	// served is the read API's view of the ranges with a reflector,
	// replaced whole on every change.
	served atomic.Pointer[readapi.Map]

	mu      sync.Mutex // guards state, stop, running and placed
	state   int        // idle, running, closed
	stop    context.CancelFunc
	running map[string]*served // ranges with a reflector, by id
	// placed: the placement was consulted once since Run started. Until
	// then running is empty because nothing was started yet, not because
	// the node reflects nothing: the node is not ready.
	placed  bool
	stopped chan struct{} // closed when Run returns
}

// served is one range's running reflector.
type served struct {
	r       *reflector.Reflector
	primary bool
	cancel  context.CancelFunc
	done    chan struct{}
	started time.Time
	synced  bool      // the sync time was observed
	lostAt  time.Time // when the node stopped owning the range (handoff)
}

// owner is implemented by placements that tell ownership apart from
// keeping a range during a handoff.
type owner interface{ Owns(rangeID string) bool }

const (
	idle = iota
	running
	closed
)

// New builds a node and opens its listener; Run starts it.
func New(cfg Config) (*Node, error) {
	if cfg.Etcd == nil || cfg.NATS == nil || cfg.Registry == nil || cfg.Codec == nil || cfg.Ranges == nil {
		return nil, errors.New("cannot make cache node: Etcd, NATS, Registry, Codec and Ranges are required")
	}
	if cfg.ProgressInterval < 0 || cfg.WaitTimeout < 0 || cfg.StallAfter < 0 {
		return nil, errors.New("cannot make cache node: negative duration")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Placement == nil {
		cfg.Placement = everything{}
	}
	if cfg.Window.NodeMaxBytes == 0 {
		cfg.Window.NodeMaxBytes = window.DefaultBudgetBytes
	}
	if cfg.Window.NodeMinBytes == 0 {
		cfg.Window.NodeMinBytes = window.DefaultBudgetMinBytes
	}
	if cfg.Window.NodeShare == 0 {
		cfg.Window.NodeShare = window.DefaultBudgetShare
	}
	budget, err := window.NewBudget(window.BudgetConfig{
		Max: cfg.Window.NodeMaxBytes, Min: cfg.Window.NodeMinBytes, Share: cfg.Window.NodeShare,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make cache node: %w", err)
	}
	n := &Node{cfg: cfg, log: cfg.Logger, stopped: make(chan struct{}), running: map[string]*served{}, budget: budget}
	n.m = newMetrics(cfg.Metrics, n)
	n.served.Store(&readapi.Map{})

	n.pub, err = publisher.New(publisher.Config{
		NATS: cfg.NATS, Interval: cfg.ProgressInterval, Logger: cfg.Logger, Metrics: n.m.publisher,
		Filter: cfg.PublishFilter, AskProgress: n.askProgress,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make cache node: %w", err)
	}
	n.api, err = readapi.New(readapi.Config{
		Listen: cfg.Listen, TLS: cfg.TLS, Ranges: liveRanges{n}, WaitTimeout: cfg.WaitTimeout, Logger: cfg.Logger, Metrics: n.m.readapi,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make cache node: %w", err)
	}
	return n, nil
}

// SetPlacement sets the placement before Run: a placement built on
// membership needs the node's read address, known once New has opened its
// listener.
func (n *Node) SetPlacement(p Placement) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != idle {
		return errors.New("cannot set placement: the node already runs")
	}
	n.cfg.Placement = p
	return nil
}

// liveRanges is the read API's view of the node's ranges.
type liveRanges struct{ n *Node }

func (l liveRanges) Get(id string) (readapi.Range, bool) { return l.n.served.Load().Get(id) }
func (l liveRanges) All() []readapi.Range                { return l.n.served.Load().All() }

// askProgress asks the reflector of rangeID, if it runs here, for an etcd
// progress notification (a gateway waits for the range's progress).
func (n *Node) askProgress(rangeID string) {
	if r, ok := n.served.Load().Get(rangeID); ok {
		if p, ok := r.(interface{ RequestProgress() }); ok {
			p.RequestProgress()
		}
	}
}

// Addr is the read API's listen address.
func (n *Node) Addr() string { return n.api.Addr() }

// Ready reports whether the node has started, has started the reflectors
// of the ranges its placement asks for, and every range it reflects has
// been listed: from then on every change of those ranges is in the window
// and, on a primary, published.
func (n *Node) Ready() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != running || !n.placed {
		return false
	}
	for _, s := range n.running {
		if !s.r.Ready() {
			return false
		}
	}
	return true
}

// RangeStatus is what a node tells about one range it reflects.
type RangeStatus struct {
	ID      string
	Ready   bool
	Seen    int64
	Primary bool
	// Inconsistent: the consistency checker found the cache different
	// from etcd, and the relist that repairs it has not finished.
	Inconsistent bool
	// StalledFor, when not zero, is how long the range has heard nothing
	// from etcd, past the stall timeout.
	StalledFor time.Duration
}

// Status lists the ranges the node reflects.
func (n *Node) Status() []RangeStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]RangeStatus, 0, len(n.running))
	for id, s := range n.running {
		st := RangeStatus{ID: id, Ready: s.r.Ready(), Seen: s.r.Seen(), Primary: s.primary, Inconsistent: s.r.Inconsistent()}
		if quiet, stalled := s.r.Stalled(); stalled {
			st.StalledFor = quiet
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b RangeStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Checks are the per-range lines of /readyz?verbose: each range synced,
// hearing from etcd (not stalled) and, once checked, consistent with etcd.
func (n *Node) Checks() []health.Check {
	var out []health.Check
	for _, s := range n.Status() {
		c := health.Check{Name: "range " + s.ID}
		switch {
		case !s.Ready:
			c.Err = errors.New("not synced")
		case s.Inconsistent:
			c.Err = errors.New("differs from etcd, relisting")
		case s.StalledFor > 0:
			c.Err = fmt.Errorf("stalled: nothing from etcd for %s, seen revision %d", s.StalledFor.Round(time.Second), s.Seen)
		}
		out = append(out, c)
	}
	return out
}

// primaryObjects counts the objects of the ready ranges this node
// publishes, by resource.
func (n *Node) primaryObjects() map[schema.GroupResource]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[schema.GroupResource]int{}
	for _, s := range n.running {
		if !s.primary {
			continue
		}
		snap, err := s.r.Snapshot()
		if err != nil {
			continue // not ready: nothing to count yet
		}
		out[s.r.Range().Resource.GVR().GroupResource()] += snap.Len()
	}
	return out
}

// Run runs the publisher, the read API and the reflectors the placement
// asks for until ctx is done or Close is called, then stops them all and
// returns.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.state != idle {
		n.mu.Unlock()
		return errors.New("cannot run cache node: already run or closed")
	}
	n.state = running
	ctx, cancel := context.WithCancel(ctx)
	n.stop = cancel
	n.mu.Unlock()
	defer close(n.stopped)
	defer cancel()

	start := time.Now()
	n.log.Info("cache node starting", "addr", n.Addr(), "ranges", len(n.cfg.Ranges.Current().All()))
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	fail := func(err error) {
		errMu.Lock()
		if first == nil {
			first = err
		}
		errMu.Unlock()
		cancel()
	}
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil {
				n.log.Error("cache node part failed", "part", name, "err", err)
				fail(fmt.Errorf("cannot run %s: %w", name, err))
			}
		})
	}
	run("publisher", n.pub.Run)
	run("read API", n.api.Run)
	// A change of the range table is one more wake-up: taken before
	// place reads the table, so no change falls between the two.
	tableChanged := n.cfg.Ranges.Changed()
	n.place(ctx, fail)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tableChanged:
			tableChanged = n.cfg.Ranges.Changed()
			n.place(ctx, fail)
		case <-n.cfg.Placement.Changes():
			n.place(ctx, fail)
		case <-tick.C:
			n.place(ctx, fail)
		}
	}
	n.mu.Lock()
	all := maps.Values(n.running)
	n.mu.Unlock()
	for s := range all {
		s.cancel()
		<-s.done
	}
	wg.Wait()
	n.log.Info("cache node stopped", "ran", time.Since(start))
	return first
}

// place starts the reflectors the placement wants, stops those it no
// longer wants or the table no longer has, and tells the publisher which
// ranges it is primary for.
func (n *Node) place(ctx context.Context, fail func(error)) {
	if ctx.Err() != nil {
		return
	}
	table := n.cfg.Ranges.Current()
	n.mu.Lock()
	defer n.mu.Unlock()
	defer func() { n.placed = true }()
	changed := false
	for id, s := range n.running {
		// A range is gone (its resource was removed) or was replaced (its
		// resource or bounds changed): stop it, forget it.
		if rng, ok := table.ByID(id); ok && rng == s.r.Range() {
			continue
		}
		n.log.Info("range left the table", "range", id, "served", time.Since(s.started))
		s.cancel()
		<-s.done
		delete(n.running, id)
		n.pub.SetPrimary(id, false)
		n.m.ownerChanges.Inc()
		changed = true
	}
	for _, rng := range table.All() {
		s, has := n.running[rng.ID]
		want := n.cfg.Placement.Wants(rng.ID, has && s.r.Ready())
		switch {
		case want && !has:
			s, err := n.startRange(ctx, rng, fail)
			if err != nil {
				fail(err)
				return
			}
			n.running[rng.ID] = s
			changed = true
		case !want && has:
			if !s.lostAt.IsZero() {
				n.m.handoff.Observe(time.Since(s.lostAt).Seconds())
			}
			n.log.Info("handing range over", "range", rng.ID, "served", time.Since(s.started))
			s.cancel()
			<-s.done
			delete(n.running, rng.ID)
			n.pub.SetPrimary(rng.ID, false)
			n.m.ownerChanges.Inc()
			changed = true
		}
		if s, ok := n.running[rng.ID]; ok {
			if !s.synced && s.r.Ready() {
				s.synced = true
				n.m.sync.Observe(time.Since(s.started).Seconds())
			}
			if o, ok := n.cfg.Placement.(owner); ok && s.lostAt.IsZero() && !o.Owns(rng.ID) {
				s.lostAt = time.Now() // kept until the new owners are ready
			}
			primary := n.cfg.Placement.Primary(rng.ID, s.r.Ready())
			if primary != s.primary {
				s.primary = primary
				n.pub.SetPrimary(rng.ID, primary)
				n.log.Info("range primary changed", "range", rng.ID, "primary", primary)
			}
		}
	}
	if changed {
		m := readapi.Map{}
		for id, s := range n.running {
			m[id] = s.r
		}
		n.served.Store(&m)
	}
}

// startRange starts a reflector for rng; it publishes nothing until the
// placement makes it primary.
func (n *Node) startRange(ctx context.Context, rng *ranges.Range, fail func(error)) (*served, error) {
	r, err := reflector.New(reflector.Config{
		Etcd: n.cfg.Etcd, Range: rng, Registry: n.cfg.Registry, Codec: n.cfg.Codec,
		Window: window.Config{
			MaxEvents: n.cfg.Window.MaxEvents, MaxBytes: n.cfg.Window.MaxBytes, MaxAge: n.cfg.Window.MaxAge,
			Budget: n.budget,
		},
		ProgressInterval: n.cfg.ProgressInterval,
		StallAfter:       n.cfg.StallAfter,
		Transformers:     n.cfg.Transformers,
		EagerProtobuf:    n.cfg.EagerProtobuf,
		Sink:             n.pub,
		Logger:           n.cfg.Logger,
		Metrics:          n.m.reflector,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot reflect range %s: %w", rng.ID, err)
	}
	_, single := n.cfg.Placement.(everything)
	n.pub.SetPrimary(rng.ID, single)
	rctx, cancel := context.WithCancel(ctx)
	s := &served{r: r, primary: single, cancel: cancel, done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(s.done)
		if err := r.Run(rctx); err != nil && rctx.Err() == nil {
			n.log.Error("reflector failed", "range", rng.ID, "err", err)
			fail(fmt.Errorf("cannot reflect range %s: %w", rng.ID, err))
		}
	}()
	n.m.ownerChanges.Inc()
	return s, nil
}

// Close stops a running node and waits for Run to return; on a node that
// never ran it releases the listener.
func (n *Node) Close() error {
	n.mu.Lock()
	state := n.state
	n.state = closed
	n.mu.Unlock()
	switch state {
	case running:
		n.stop()
		<-n.stopped
		return nil
	case idle:
		return n.api.Close()
	}
	return nil
}
