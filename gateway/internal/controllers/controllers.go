// Package controllers runs the cluster-wide controllers kube-apiserver
// runs inside itself, in exactly one gateway of the tier at a time: each
// gateway is a candidate of the leader election (gateway/internal/leader,
// a Lease kube-system/kgate-controllers), and the one holding the Lease
// runs the controllers: CRD names and status (crdcontroller), the APF
// bootstrap configuration (apfbootstrap), the collection of expired
// apiserver identity Leases (apiserverid), the "kubernetes" Service and
// its endpoints (kubernetesservice), the
// extension-apiserver-authentication ConfigMap (authtrust), the
// NodePort repair (nodeportrepair), the cluster IP repair (iprepair),
// the local APIServices
// (autoregister) and the Available condition of the others
// (availability). kgate_controllers_leading tells which
// gateway leads.
package controllers

import (
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/gateway/internal/aggregator"
	"github.com/kgate/kgate/gateway/internal/apfbootstrap"
	"github.com/kgate/kgate/gateway/internal/apiserverid"
	"github.com/kgate/kgate/gateway/internal/authtrust"
	"github.com/kgate/kgate/gateway/internal/autoregister"
	"github.com/kgate/kgate/gateway/internal/availability"
	"github.com/kgate/kgate/gateway/internal/crdcontroller"
	"github.com/kgate/kgate/gateway/internal/iprepair"
	"github.com/kgate/kgate/gateway/internal/kubernetesservice"
	"github.com/kgate/kgate/gateway/internal/leader"
	"github.com/kgate/kgate/gateway/internal/nodeportrepair"
	"github.com/kgate/kgate/storage/backend"
)

// Config configures the election; zero values are leader's defaults.
type Config struct {
	// Identity is this gateway's holder identity; default hostname_uuid.
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Self is this gateway's advertised IP and port once it listens (the
	// kubernetes Service's endpoints); nil runs no kubernetes Service
	// controller.
	Self func() (netip.Addr, int, bool)
	// AuthTrust is this gateway's authentication settings for the
	// extension-apiserver-authentication ConfigMap.
	AuthTrust authtrust.Info
	// Aggregator is how the gateways reach extension API servers: the
	// availability checks go the same way.
	Aggregator aggregator.Config
}

// Deps are what the controllers run on; all required.
type Deps struct {
	Backend *backend.Backend
	// Semantics is upstream's semantics (builtin.Semantics): its create
	// for the kubernetes Service, its delete for the objects of a
	// deleted CRD (crdcontroller.Deleter).
	Semantics kubernetesservice.Semantics
	Logger    *slog.Logger
	Metrics   prometheus.Registerer
}

// Controllers is the election and the controllers it runs.
type Controllers struct {
	elector *leader.Elector
	leading prometheus.GaugeFunc
}

// New builds the controllers and the election; Start begins competing.
func New(cfg Config, d Deps) (*Controllers, error) {
	if d.Backend == nil || d.Backend.Etcd == nil || d.Semantics == nil || d.Logger == nil || d.Metrics == nil {
		return nil, errors.New("cannot make the cluster-wide controllers: Backend (with Etcd), Semantics, Logger and Metrics are required")
	}
	list, err := controllers(cfg, d)
	if err != nil {
		return nil, fmt.Errorf("cannot make the cluster-wide controllers: %w", err)
	}
	b := d.Backend
	e, err := leader.New(leader.Config{
		Store: b.Store, Registry: b.Registry, Identity: cfg.Identity,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		Logger: d.Logger.With("component", "leader"),
	}, list...)
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

// controllers builds the controllers the leader runs.
func controllers(cfg Config, d Deps) ([]leader.Controller, error) {
	b := d.Backend
	log := func(name string) *slog.Logger { return d.Logger.With("controller", name) }
	deleter, ok := d.Semantics.(crdcontroller.Deleter)
	if !ok {
		return nil, fmt.Errorf("cannot make the cluster-wide controllers: the semantics (%T) do not decide deletes", d.Semantics)
	}
	crds, err := crdcontroller.New(crdcontroller.Config{Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Deleter: deleter, Logger: d.Logger})
	if err != nil {
		return nil, err
	}
	apf, err := apfbootstrap.New(apfbootstrap.Config{Store: b.Store, Registry: b.Registry, Logger: log("apf-bootstrap")})
	if err != nil {
		return nil, err
	}
	leaseGC, err := apiserverid.NewGC(apiserverid.GCConfig{Store: b.Store, Registry: b.Registry, Logger: log("apiserver-lease-gc")})
	if err != nil {
		return nil, err
	}
	apis, err := autoregister.New(autoregister.Config{Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Logger: log("apiservice-autoregister")})
	if err != nil {
		return nil, err
	}
	list := []leader.Controller{
		{Name: "crd", Run: crds.Run},
		{Name: "apiservice-autoregister", Run: apis.Run},
		{Name: "apf-bootstrap", Run: apf.Run},
		{Name: "apiserver-lease-gc", Run: leaseGC.Run},
	}
	// A registry without ConfigMaps (a tier serving a chosen set of
	// resources) has nowhere to keep the authentication trust.
	if _, ok := b.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}); ok {
		trust, err := authtrust.New(authtrust.Config{Store: b.Store, Registry: b.Registry, Logger: log("cluster-authentication-trust"), Info: cfg.AuthTrust})
		if err != nil {
			return nil, err
		}
		list = append(list, leader.Controller{Name: "cluster-authentication-trust", Run: trust.Run})
	}
	// Extension API servers are found through their Services.
	if _, ok := b.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "services"}); ok {
		cert, key, err := cfg.Aggregator.ProxyClientCert()
		if err != nil {
			return nil, err
		}
		resolver := cfg.Aggregator.Resolver(b.Registry, b.Store)
		avail, err := availability.New(availability.Config{
			Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Backends: resolver, Dial: resolver.Dial,
			CertPEM: cert, KeyPEM: key, Logger: log("apiservice-availability"), Metrics: d.Metrics,
		})
		if err != nil {
			return nil, err
		}
		list = append(list, leader.Controller{Name: "apiservice-availability", Run: avail.Run})
	}
	if b.NodePorts != nil {
		repair, err := nodeportrepair.New(nodeportrepair.Config{Store: b.Store, Registry: b.Registry, Ports: b.NodePorts, Logger: log("nodeport-repair")})
		if err != nil {
			return nil, err
		}
		list = append(list, leader.Controller{Name: "nodeport-repair", Run: repair.Run})
	}
	if b.ServiceIPs != nil {
		repair, err := iprepair.New(iprepair.Config{Store: b.Store, Registry: b.Registry, IPs: b.ServiceIPs, Logger: log("clusterip-repair")})
		if err != nil {
			return nil, err
		}
		list = append(list, leader.Controller{Name: "clusterip-repair", Run: repair.Run})
	}
	if cfg.Self != nil && b.ServiceIPs != nil {
		leases, err := kubernetesservice.NewLeases(b.Etcd, b.Codec, 0)
		if err != nil {
			return nil, err
		}
		svc, err := kubernetesservice.New(kubernetesservice.Config{
			Store: b.Store, Registry: b.Registry, Semantics: d.Semantics, ServiceIPs: b.ServiceIPs, Leases: leases,
			Logger: log("kubernetes-service"), ServiceIP: b.ServiceIPs.Reserved(), Self: cfg.Self,
		})
		if err != nil {
			return nil, err
		}
		list = append(list, leader.Controller{Name: "kubernetes-service", Run: svc.Run})
	}
	return list, nil
}

// Start competes for the Lease; the leader runs the controllers.
func (c *Controllers) Start() { c.elector.Start() }

// Close stops the controllers and releases the Lease when held.
func (c *Controllers) Close() { c.elector.Close() }

// Leading reports whether this member runs the controllers.
func (c *Controllers) Leading() bool { return c.elector.Leading() }
