// Package controllers runs the cluster-wide controllers kube-apiserver
// runs inside itself, in exactly one gateway of the tier at a time: each
// gateway is a candidate of the leader election (gateway/internal/leader,
// a Lease kube-system/kgate-controllers), and the one holding the Lease
// runs the controllers (the CRD controller, gateway/internal/crdcontroller;
// the local APIServices, gateway/internal/autoregister). kgate_controllers_leading tells which
// gateway leads.
package controllers

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/gateway/internal/autoregister"
	"github.com/kgate/kgate/gateway/internal/crdcontroller"
	"github.com/kgate/kgate/gateway/internal/leader"
	"github.com/kgate/kgate/storage/backend"
)

// Config configures the election; zero values are leader's defaults.
type Config struct {
	// Identity is this gateway's holder identity; default hostname_uuid.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Deps are what the controllers run on; all required.
type Deps struct {
	Backend *backend.Backend
	Logger  *slog.Logger
	Metrics prometheus.Registerer
}

// Controllers is the election and the controllers it runs.
type Controllers struct {
	elector *leader.Elector
	leading prometheus.GaugeFunc
}

// New builds the controllers and the election; Start begins competing.
func New(cfg Config, d Deps) (*Controllers, error) {
	if d.Backend == nil || d.Backend.Etcd == nil || d.Logger == nil || d.Metrics == nil {
		return nil, errors.New("cannot make the cluster-wide controllers: Backend (with Etcd), Logger and Metrics are required")
	}
	b := d.Backend
	crds, err := crdcontroller.New(crdcontroller.Config{Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Logger: d.Logger})
	if err != nil {
		return nil, fmt.Errorf("cannot make the cluster-wide controllers: %w", err)
	}
	apis, err := autoregister.New(autoregister.Config{Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Logger: d.Logger})
	if err != nil {
		return nil, fmt.Errorf("cannot make the cluster-wide controllers: %w", err)
	}
	e, err := leader.New(leader.Config{
		Store: b.Store, Registry: b.Registry, Identity: cfg.Identity,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		Logger: d.Logger.With("component", "leader"),
	}, leader.Controller{Name: "crd", Run: crds.Run}, leader.Controller{Name: "apiservice-autoregister", Run: apis.Run})
	if err != nil {
		return nil, fmt.Errorf("cannot make the cluster-wide controllers: %w", err)
	}
	c := &Controllers{elector: e}
	c.leading = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kgate_controllers_leading",
		Help: "1 while this member holds the controllers' Lease and runs the cluster-wide controllers, else 0.",
	}, func() float64 {
		if e.Leading() {
			return 1
		}
		return 0
	})
	if err := d.Metrics.Register(c.leading); err != nil {
		return nil, fmt.Errorf("cannot make the cluster-wide controllers: %w", err)
	}
	return c, nil
}

// Start competes for the Lease; the leader runs the controllers.
func (c *Controllers) Start() { c.elector.Start() }

// Close stops the controllers and releases the Lease when held.
func (c *Controllers) Close() { c.elector.Close() }

// Leading reports whether this member runs the controllers.
func (c *Controllers) Leading() bool { return c.elector.Leading() }
