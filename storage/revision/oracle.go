// Package revision tells etcd's current revision to many concurrent callers
// with few etcd calls, without giving up linearizability: a caller is only
// answered by an etcd read that started after it asked.
package revision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/storage"
)

// DefaultTimeout bounds one etcd call of the oracle.
const DefaultTimeout = 5 * time.Second

// probeKey is the key the oracle reads. Any key does: the response header
// carries the store's revision whether or not the key exists, and a
// count-only read of one key costs etcd next to nothing.
const probeKey = "/registry/"

// ErrClosed is returned by Current after Close.
var ErrClosed = errors.New("revision: oracle closed")

// Config configures an Oracle.
type Config struct {
	// KV reads etcd; required. A *clientv3.Client will do.
	KV clientv3.KV
	// Timeout bounds one etcd call. Default DefaultTimeout.
	Timeout time.Duration
	// Logger is required.
	Logger *slog.Logger
}

// Oracle answers Current. At most one etcd call is in flight; callers that
// arrive while it runs are all served by the next one.
type Oracle struct {
	kv      clientv3.KV
	timeout time.Duration
	logger  *slog.Logger

	kick   chan struct{} // buffered 1: a batch is waiting for a call
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu      sync.Mutex
	pending *batch // guarded by mu: callers waiting for the next call; nil if none
	closed  bool   // guarded by mu
}

// batch is the callers served by one etcd call. rev and err are written
// before done is closed.
type batch struct {
	done    chan struct{}
	waiters int // guarded by Oracle.mu while the batch is pending
	rev     int64
	err     error
}

// New starts an Oracle. Close stops it.
func New(cfg Config) (*Oracle, error) {
	if cfg.KV == nil {
		return nil, errors.New("cannot create revision oracle: KV is required")
	}
	if cfg.Logger == nil {
		return nil, errors.New("cannot create revision oracle: Logger is required")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("cannot create revision oracle: negative Timeout")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &Oracle{
		kv:      cfg.KV,
		timeout: cfg.Timeout,
		logger:  cfg.Logger,
		kick:    make(chan struct{}, 1),
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go o.run()
	return o, nil
}

// Current returns etcd's current revision, read after the call began: at
// least the revision of every write acknowledged before Current was called.
// Errors from etcd wrap storage.ErrUnavailable.
func (o *Oracle) Current(ctx context.Context) (int64, error) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return 0, fmt.Errorf("cannot get current revision: %w", ErrClosed)
	}
	b := o.pending
	if b == nil {
		b = &batch{done: make(chan struct{})}
		o.pending = b
	}
	b.waiters++
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default: // a kick is already queued
	}
	select {
	case <-b.done:
		return b.rev, b.err
	case <-ctx.Done():
		return 0, fmt.Errorf("cannot get current revision: %w", ctx.Err())
	}
}

// run makes one etcd call per pending batch, one at a time. A batch is taken
// before its call starts, so everyone in it arrived before the call.
func (o *Oracle) run() {
	defer close(o.done)
	for {
		select {
		case <-o.kick:
		case <-o.ctx.Done():
			o.mu.Lock()
			b := o.pending
			o.pending = nil
			o.mu.Unlock()
			if b != nil {
				b.err = fmt.Errorf("cannot get current revision: %w", ErrClosed)
				close(b.done)
			}
			return
		}
		o.mu.Lock()
		b := o.pending
		o.pending = nil
		o.mu.Unlock()
		if b == nil {
			continue
		}
		b.rev, b.err = o.read()
		close(b.done)
	}
}

func (o *Oracle) read() (int64, error) {
	ctx, cancel := context.WithTimeout(o.ctx, o.timeout)
	defer cancel()
	resp, err := o.kv.Get(ctx, probeKey, clientv3.WithCountOnly())
	if err != nil {
		if o.ctx.Err() != nil {
			return 0, fmt.Errorf("cannot get current revision: %w", ErrClosed)
		}
		o.logger.Warn("cannot read etcd revision", "error", err)
		return 0, fmt.Errorf("cannot get current revision: %w: %w", storage.ErrUnavailable, err)
	}
	return resp.Header.Revision, nil
}

// Close stops the oracle and waits for its goroutine. Calls waiting for a
// revision and later calls return ErrClosed.
func (o *Oracle) Close() error {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	<-o.done
	return nil
}
