// Package cachenode is the cache node: for each range of the range table a
// reflector keeps an ordered store and a window of recent events in step
// with etcd; every event is published once on NATS; an internal HTTP read
// API serves gets, lists and event catch-up from memory. Gateways read it
// through cachenode/client and subscribe to the subjects of
// cachenode/event.
package cachenode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kgate/kgate/cachenode/internal/publisher"
	"github.com/kgate/kgate/cachenode/internal/readapi"
	"github.com/kgate/kgate/cachenode/internal/reflector"
	"github.com/kgate/kgate/cachenode/internal/window"
	"github.com/kgate/kgate/cachenode/ranges"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WindowConfig bounds the event window of each range. Zero fields take
// the defaults: 100,000 events, 256 MiB, 5 minutes.
type WindowConfig struct {
	MaxEvents int
	MaxBytes  int64
	MaxAge    time.Duration
}

// Config configures a cache node.
type Config struct {
	Etcd     *clientv3.Client   // required
	NATS     *nats.Conn         // required
	Registry *registry.Registry // required
	Codec    *codec.Codec       // required
	Ranges   *ranges.Table      // required: the ranges this node reflects
	// Listen is the read API's address; default "127.0.0.1:0" (a free
	// port, see Addr).
	Listen string
	// Window bounds each range's event window.
	Window WindowConfig
	// ProgressInterval: an idle range publishes progress, and asks etcd
	// for it, after this long. Default 1s.
	ProgressInterval time.Duration
	// WaitTimeout bounds a read's wait for a revision (then
	// storage.ErrRevisionTooLarge). Default 3s.
	WaitTimeout time.Duration
	// EagerProtobuf encodes each object version as protobuf when stored,
	// rather than on its first protobuf read.
	EagerProtobuf bool
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics registers the node's metrics; nil registers none.
	Metrics prometheus.Registerer
}

// Node is a cache node.
type Node struct {
	cfg        Config
	log        *slog.Logger
	reflectors []*reflector.Reflector
	pub        *publisher.Publisher
	api        *readapi.Server

	mu      sync.Mutex // guards state and stop
	state   int        // idle, running, closed
	stop    context.CancelFunc
	stopped chan struct{} // closed when Run returns
}

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
	if cfg.ProgressInterval < 0 || cfg.WaitTimeout < 0 {
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
	n := &Node{cfg: cfg, log: cfg.Logger, stopped: make(chan struct{})}
	m := newMetrics(cfg.Metrics, n)

	var err error
	n.pub, err = publisher.New(publisher.Config{
		NATS: cfg.NATS, Interval: cfg.ProgressInterval, Logger: cfg.Logger, Metrics: m.publisher,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make cache node: %w", err)
	}
	served := map[string]readapi.Range{}
	for _, rng := range cfg.Ranges.All() {
		r, err := reflector.New(reflector.Config{
			Etcd: cfg.Etcd, Range: rng, Registry: cfg.Registry, Codec: cfg.Codec,
			Window:           window.Config{MaxEvents: cfg.Window.MaxEvents, MaxBytes: cfg.Window.MaxBytes, MaxAge: cfg.Window.MaxAge},
			ProgressInterval: cfg.ProgressInterval,
			EagerProtobuf:    cfg.EagerProtobuf,
			Sink:             n.pub,
			Logger:           cfg.Logger,
			Metrics:          m.reflector,
		})
		if err != nil {
			return nil, fmt.Errorf("cannot make cache node: %w", err)
		}
		n.reflectors = append(n.reflectors, r)
		served[rng.ID] = r
	}
	n.api, err = readapi.New(readapi.Config{
		Listen: cfg.Listen, Ranges: served, WaitTimeout: cfg.WaitTimeout, Logger: cfg.Logger, Metrics: m.readapi,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make cache node: %w", err)
	}
	return n, nil
}

// Addr is the read API's listen address.
func (n *Node) Addr() string { return n.api.Addr() }

// Ready reports whether every range has been listed.
func (n *Node) Ready() bool {
	for _, r := range n.reflectors {
		if !r.Ready() {
			return false
		}
	}
	return true
}

// Run runs the reflectors, the publisher and the read API until ctx is
// done or Close is called, then stops them all and returns.
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
	n.log.Info("cache node starting", "addr", n.Addr(), "ranges", len(n.reflectors))
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil {
				n.log.Error("cache node part failed", "part", name, "err", err)
				errMu.Lock()
				if first == nil {
					first = fmt.Errorf("cannot run %s: %w", name, err)
				}
				errMu.Unlock()
				cancel()
			}
		})
	}
	run("publisher", n.pub.Run)
	for _, r := range n.reflectors {
		run("reflector "+r.Range().ID, r.Run)
	}
	run("read API", n.api.Run)
	<-ctx.Done()
	wg.Wait()
	n.log.Info("cache node stopped", "ran", time.Since(start))
	return first
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
