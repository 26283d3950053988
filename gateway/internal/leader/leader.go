// Package leader elects one member of the tier to run the cluster-wide
// controllers kube-apiserver runs inside itself (CRD naming, establishing
// and cleanup; later the kubernetes Service, apiserver identity, ...).
// Candidates compete for a coordination.k8s.io/v1 Lease (kube-system/
// kgate-controllers by default) with client-go's leader election
// (tools/leaderelection: lease duration, renew deadline, retry period)
// over a lock kept through kgate's store: every acquire and renew is a
// compare-and-swap on the Lease's etcd revision, so two candidates never
// both hold it. The leader runs the registered controllers with a context
// that ends when it stops renewing (the renew deadline passed, or Close);
// a deposed leader's controllers are stopped before it can compete again.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/kgate/kgate/storage/registry"
)

// Defaults of Config, kube-controller-manager's.
const (
	DefaultNamespace     = "kube-system"
	DefaultName          = "kgate-controllers"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// A Controller runs until ctx ends (leadership lost or Close) and then
// returns. It may be started again at a later leadership.
type Controller struct {
	Name string
	Run  func(ctx context.Context)
}

// Config configures an Elector.
type Config struct {
	// Store keeps the Lease (storage.Store); Registry serves leases.
	// Both required.
	Store    Store
	Registry *registry.Registry
	// Namespace and Name of the Lease. Defaults DefaultNamespace,
	// DefaultName.
	Namespace, Name string
	// Identity of this candidate, unique in the tier. Default
	// hostname_uuid, as client-go's callers make it.
	Identity string
	// LeaseDuration, RenewDeadline, RetryPeriod as client-go's
	// LeaderElectionConfig; defaults DefaultLeaseDuration,
	// DefaultRenewDeadline, DefaultRetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger is required.
	Logger *slog.Logger
}

// Elector competes for the Lease and runs the controllers while it holds
// it. Start begins, Close ends (releasing the Lease when held).
type Elector struct {
	cfg         Config
	controllers []Controller
	le          *leaderelection.LeaderElector
	log         *slog.Logger

	cancel context.CancelFunc
	done   chan struct{} // closed when the election loop has returned

	mu      sync.Mutex // guards term, leading, leader
	term    *term      // the current round of the election loop
	leading bool
	leader  string // the holder last observed
}

// term is one round of client-go's election (acquire, renew until lost).
// client-go starts the leading callback in a goroutine of its own; the
// round's end waits for it when it started, and a callback that comes
// after the round ended runs nothing.
type term struct {
	started, ended bool
	done           chan struct{} // closed when the callback's controllers have returned
}

// New checks cfg and prepares the election; nothing runs before Start.
func New(cfg Config, controllers ...Controller) (*Elector, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make leader elector: Store, Registry and Logger are required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("cannot make leader elector: %w", err)
		}
		cfg.Identity = host + "_" + uuid.NewString()
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline <= 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	for _, c := range controllers {
		if c.Name == "" || c.Run == nil {
			return nil, errors.New("cannot make leader elector: a controller needs a name and a Run func")
		}
	}
	res, ok := cfg.Registry.Lookup(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"})
	if !ok {
		return nil, errors.New("cannot make leader elector: coordination.k8s.io/v1 leases are not served")
	}
	e := &Elector{cfg: cfg, controllers: controllers, log: cfg.Logger.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)}
	lock := &leaseLock{store: cfg.Store, res: res, ns: cfg.Namespace, name: cfg.Name, identity: cfg.Identity, timeout: cfg.RenewDeadline}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		// On Close the leader writes an expired record, so another
		// candidate takes over at its next retry, not a lease later.
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: e.lead,
			OnStoppedLeading: e.stopped,
			OnNewLeader:      e.observe,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make leader elector: %w", err)
	}
	e.le = le
	return e, nil
}

// Start competes for the Lease until Close: acquire, run the controllers
// while renewing, and after losing it, stop them and compete again.
func (e *Elector) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	// client-go's election logs through the context's logger: ours.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(e.log.Handler()))
	e.cancel = cancel
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		for {
			t := &term{done: make(chan struct{})}
			e.mu.Lock()
			e.term = t
			e.mu.Unlock()
			e.le.Run(ctx) // returns when leadership is lost or ctx ends
			e.mu.Lock()
			t.ended = true
			started := t.started
			e.mu.Unlock()
			// The controllers of a lost leadership end before this
			// candidate may lead again.
			if started {
				<-t.done
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
}

// Close stops competing: the controllers' context ends, they are waited
// for, and a held Lease is released. It may be called more than once, and
// without Start.
func (e *Elector) Close() {
	if e.cancel != nil {
		e.cancel()
		<-e.done
	}
}

// Leading reports whether this candidate holds the Lease and runs the
// controllers.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading
}

// Identity is this candidate's holder identity.
func (e *Elector) Identity() string { return e.cfg.Identity }

// Leader returns the holder identity last observed ("" before any).
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// lead runs the controllers until ctx ends, then waits for them.
// client-go calls it in a goroutine of its own when the Lease is
// acquired, and cancels ctx when renewal stops.
func (e *Elector) lead(ctx context.Context) {
	e.mu.Lock()
	t := e.term
	// A callback of an ended round has a cancelled ctx: e.term may be
	// the next round's already.
	if ctx.Err() != nil || t == nil || t.ended {
		e.mu.Unlock()
		return
	}
	t.started = true
	e.leading = true
	e.mu.Unlock()
	defer close(t.done)
	e.log.Info("leading: starting the cluster-wide controllers", "controllers", len(e.controllers))
	var wg sync.WaitGroup
	for _, c := range e.controllers {
		wg.Go(func() { c.Run(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	e.mu.Lock()
	e.leading = false
	e.mu.Unlock()
}

// stopped is client-go's OnStoppedLeading: called when Run returns, as
// leader or not.
func (e *Elector) stopped() {
	e.mu.Lock()
	was := e.leading
	e.leading = false
	e.mu.Unlock()
	if was {
		e.log.Info("stopped leading: the cluster-wide controllers stop")
	}
}

func (e *Elector) observe(identity string) {
	e.mu.Lock()
	e.leader = identity
	e.mu.Unlock()
	if identity != e.cfg.Identity {
		e.log.Debug("another candidate leads", "leader", identity)
	}
}
