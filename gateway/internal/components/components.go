// Package components builds the parts a gateway serves the API with —
// the read path (router to cache nodes, watch hub), access (authn, authz,
// reviews), the admission chain, the guard (audit, fairness, serving
// TLS), upstream's write semantics and field managers, the REST handlers,
// discovery, OpenAPI and request metrics — in one constructor, starts the
// background ones in order and stops them in reverse, logging how long
// each step took. The gateway root only serves what it builds.
package components

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/gateway/internal/access"
	"github.com/kgate/kgate/gateway/internal/admission/chain"
	"github.com/kgate/kgate/gateway/internal/aggregator"
	"github.com/kgate/kgate/gateway/internal/apf"
	"github.com/kgate/kgate/gateway/internal/apiserverid"
	"github.com/kgate/kgate/gateway/internal/authn"
	"github.com/kgate/kgate/gateway/internal/authtrust"
	"github.com/kgate/kgate/gateway/internal/bootstrap"
	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/controllers"
	"github.com/kgate/kgate/gateway/internal/crconvert"
	"github.com/kgate/kgate/gateway/internal/customresource"
	"github.com/kgate/kgate/gateway/internal/discovery"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/fieldmanager"
	"github.com/kgate/kgate/gateway/internal/guard"
	"github.com/kgate/kgate/gateway/internal/kubeletproxy"
	"github.com/kgate/kgate/gateway/internal/kubernetesservice"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/openapi"
	"github.com/kgate/kgate/gateway/internal/reqmetrics"
	"github.com/kgate/kgate/gateway/internal/rest"
	"github.com/kgate/kgate/gateway/internal/route"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/registry"
)

// Config are the settings of the parts (the gateway's Config, less the
// server's own).
type Config struct {
	// TLS is the serving configuration the guard reloads certificates
	// into; required.
	TLS *tls.Config
	// CacheNodes are the read API addresses used when Deps.Directory is
	// nil.
	CacheNodes []string
	// CacheNodeTLS, when set, is the client side of the cache nodes'
	// mutual TLS (the gateway's internal certificate).
	CacheNodeTLS *tls.Config
	// KubernetesVersion and Build make /version.
	KubernetesVersion, Build string
	// ConsistentReadFallback, MinWatchTimeout, BookmarkInterval: see
	// rest.Config.
	ConsistentReadFallback string
	MinWatchTimeout        time.Duration
	BookmarkInterval       time.Duration
	// QuotaRecountInterval, EnableAdmissionPlugins,
	// DisableAdmissionPlugins: see chain.Config.
	QuotaRecountInterval                            time.Duration
	EnableAdmissionPlugins, DisableAdmissionPlugins []string

	Auth       access.Config
	Audit      guard.AuditConfig
	Limits     guard.LimitsConfig
	ServingTLS guard.ServingTLSConfig
	Kubelet    kubeletproxy.Config
	// AdvertiseAddress is the IP this gateway is reached at by cluster
	// members (kube-apiserver's --advertise-address): the kubernetes
	// Service's endpoint and the identity Lease. Default: the listen
	// address, or the host's default interface when that is unspecified.
	AdvertiseAddress string
	Aggregator       aggregator.Config
}

// Deps are what the parts run on; the caller owns them.
type Deps struct {
	Backend   *backend.Backend     // required
	NATS      *nats.Conn           // required
	Directory *directory.Directory // optional: Config.CacheNodes without
	Logger    *slog.Logger         // required
	Metrics   prometheus.Registerer
	Gatherer  prometheus.Gatherer
}

// Set is the gateway's parts. Its fields are read-only after New.
type Set struct {
	// typeConverter is the structure of the built-in kinds, from
	// upstream's OpenAPI definitions: for server-side apply and
	// MutatingAdmissionPolicy.
	typeConverter managedfields.TypeConverter
	// fields are the built-in kinds' field managers.
	fields *fieldmanager.Managers

	Discovery *discovery.Discovery
	OpenAPI   *openapi.Documents
	Codec     *negotiate.Codec
	Metrics   *reqmetrics.Metrics
	Router    *route.Router
	Hub       *watchhub.Hub
	Access    *access.Access
	Chain     *chain.Admission
	Guard     *guard.Guard
	// Flow is API Priority and Fairness; nil without seats.
	Flow      *apf.Controller
	Semantics *builtin.Semantics // upstream's write semantics (rest, bootstrap)
	REST      *rest.Handler
	// Kubelet proxies pods/log, exec, attach, portforward and the proxy
	// subresources to kubelets.
	Kubelet *kubeletproxy.Proxy
	// Aggregator proxies the requests of non-local APIServices to their
	// extension servers, over the feed of APIServices.
	Aggregator  *aggregator.Dispatch
	apiServices *feed.Feed
	// Controllers are the cluster-wide controllers, run by the elected
	// gateway.
	Controllers *controllers.Controllers
	// TLS is the serving configuration with the guard's certificate
	// reloading.
	TLS *tls.Config

	log        *slog.Logger
	backend    *backend.Backend
	advertise  netip.Addr
	self       atomic.Pointer[netip.AddrPort] // set by Start
	keepers    sync.WaitGroup                 // the identity and endpoint lease keepers
	stopKeep   context.CancelFunc             // ends the keepers; set by Start
	base       context.Context                // cancelled when the stop starts: ends watches
	cancelBase context.CancelFunc
	drainOnce  sync.Once
	stopOnce   sync.Once
}

// New builds every part; on error what it built is closed.
func New(cfg Config, d Deps) (_ *Set, err error) {
	switch {
	case cfg.TLS == nil || d.Backend == nil || d.NATS == nil || d.Logger == nil || d.Metrics == nil || d.Gatherer == nil:
		return nil, errors.New("cannot make gateway components: TLS, Backend, NATS, Logger, Metrics and Gatherer are required")
	case len(cfg.CacheNodes) == 0 && d.Directory == nil:
		return nil, errors.New("cannot make gateway components: cache nodes or a directory are required")
	}
	s := &Set{log: d.Logger, backend: d.Backend}
	if cfg.AdvertiseAddress != "" {
		if s.advertise, err = netip.ParseAddr(cfg.AdvertiseAddress); err != nil {
			return nil, fmt.Errorf("cannot make gateway components: advertise address: %w", err)
		}
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			s.Close(time.Second)
		}
	}()
	b := d.Backend
	v, err := discovery.NewVersion(cfg.KubernetesVersion, cfg.Build)
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if s.Discovery, err = discovery.New(b.Registry, v); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if s.OpenAPI, err = openapi.New(b.Registry, v); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if s.Codec, err = negotiate.NewCodec(b.Registry.Scheme()); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	// API Priority and Fairness's metrics are upstream's, registered
	// with the process's legacy registry.
	if s.Metrics, err = reqmetrics.New(d.Metrics, prometheus.Gatherers{d.Gatherer, apf.Gatherer()}); err != nil {
		return nil, err
	}
	if err := s.newReads(cfg, d); err != nil {
		return nil, err
	}
	if s.Access, err = access.New(cfg.Auth, access.Deps{
		Registry: b.Registry, Ranges: b.Ranges, Codec: b.Codec, Store: b.Store, Cache: s.Router, Hub: s.Hub,
		Revisions: b.Revisions, Negotiate: s.Codec, Logger: d.Logger, Metrics: d.Metrics,
	}); err != nil {
		return nil, err
	}
	if s.Semantics, err = builtin.New(registry.Builtin()); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	t0 := time.Now()
	if s.typeConverter, err = fieldmanager.NewTypeConverter(s.Semantics.Scheme()); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	s.log.Info("built the type converter of the built-in kinds", "took", time.Since(t0).Round(time.Millisecond))
	if s.Chain, err = chain.New(chain.Config{
		QuotaRecountInterval: cfg.QuotaRecountInterval, EnablePlugins: cfg.EnableAdmissionPlugins,
		DisablePlugins: cfg.DisableAdmissionPlugins, KubernetesVersion: v.Major + "." + v.Minor,
	}, chain.Deps{
		Registry: b.Registry, Ranges: b.Ranges, Codec: b.Codec, Store: b.Store, Cache: s.Router, Hub: s.Hub,
		Revisions: b.Revisions, Authorizer: s.Access.Authorizer(), Escalation: s.Access.Escalation(),
		Scheme: s.Semantics.Scheme(), TypeConverter: s.typeConverter, Features: utilfeature.DefaultFeatureGate, Logger: d.Logger,
	}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if err := s.newWrites(cfg, d); err != nil {
		return nil, err
	}
	if err := s.newGuard(cfg, d); err != nil {
		return nil, err
	}
	if s.Kubelet, err = kubeletproxy.New(s.base, cfg.Kubelet, kubeletproxy.Deps{
		Registry: b.Registry, Store: b.Store, Scheme: s.Semantics.Scheme(), Authorizer: s.Access.Authorizer(),
		Admission: s.Chain, Logger: d.Logger.With("component", "kubeletproxy"),
	}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if err := s.newAggregator(cfg, d); err != nil {
		return nil, err
	}
	if s.Controllers, err = controllers.New(controllers.Config{Self: s.Self, AuthTrust: authTrust(cfg.Auth), Aggregator: cfg.Aggregator}, controllers.Deps{
		Backend: b, Semantics: s.Semantics, Logger: d.Logger, Metrics: d.Metrics,
	}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	return s, nil
}

// newGuard builds API Priority and Fairness, unless the limits give it
// no seats, and the guard around it.
func (s *Set) newGuard(cfg Config, d Deps) error {
	b := d.Backend
	var flow guard.FlowControl
	if seats := cfg.Limits.MaxRequestsInflight + cfg.Limits.MaxMutatingRequestsInflight; seats > 0 {
		var err error
		if s.Flow, err = apf.New(apf.Config{ConcurrencyLimit: seats}, apf.Deps{
			Registry: b.Registry, Ranges: b.Ranges, Cache: s.Router, Hub: s.Hub, Revisions: b.Revisions, Codec: b.Codec,
			Store: b.Store, Fields: s.fields, Logger: d.Logger.With("component", "apf"),
		}); err != nil {
			return fmt.Errorf("cannot make gateway: %w", err)
		}
		flow = s.Flow
	}
	var err error
	if s.Guard, err = guard.New(guard.Config{
		Audit: cfg.Audit, Limits: cfg.Limits, ServingTLS: cfg.ServingTLS, RequestHeaderClientCAFile: cfg.Auth.RequestHeader.ClientCAFile,
	}, guard.Deps{TLS: cfg.TLS, NATS: d.NATS, Base: s.base, FlowControl: flow, Logger: d.Logger, Metrics: d.Metrics}); err != nil {
		return err
	}
	s.TLS = s.Guard.TLS()
	return nil
}

// newAggregator builds the feed of APIServices and the dispatch of
// aggregated requests over it.
func (s *Set) newAggregator(cfg Config, d Deps) error {
	b := d.Backend
	var err error
	if s.apiServices, err = feed.New(feed.Config{
		Registry: b.Registry, Ranges: b.Ranges, Cache: s.Router, Hub: s.Hub, Revisions: b.Revisions, Codec: b.Codec,
		Resources: []schema.GroupVersionResource{aggregator.GVR}, Logger: d.Logger.With("component", "apiservices"),
	}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	if s.Aggregator, err = aggregator.NewDispatch(s.base, cfg.Aggregator, aggregator.Deps{
		Registry: b.Registry, Store: b.Store, Services: s.apiServices.Store(aggregator.GVR),
		Logger: d.Logger.With("component", "aggregator"),
	}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	s.Discovery.SetRemote(s.Aggregator.Remote())
	s.OpenAPI.SetRemote(s.Aggregator.RemoteOpenAPI())
	return nil
}

// newReads builds the read path: the router to cache node replicas and
// the watch hub over NATS.
func (s *Set) newReads(cfg Config, d Deps) error {
	hubMetrics, err := watchhub.NewMetrics(d.Metrics)
	if err != nil {
		return err
	}
	routeMetrics, err := route.NewMetrics(d.Metrics)
	if err != nil {
		return err
	}
	var replicas route.Replicas = route.Static(cfg.CacheNodes)
	if d.Directory != nil {
		replicas = directoryReplicas{d.Directory}
	}
	if s.Router, err = route.New(route.Config{Replicas: replicas, Client: client.Config{TLS: cfg.CacheNodeTLS}, Metrics: routeMetrics}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	if s.Hub, err = watchhub.New(watchhub.Config{NATS: d.NATS, Source: s.Router, Ranges: d.Backend.Ranges, Logger: d.Logger.With("component", "watchhub"), Metrics: hubMetrics}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	return nil
}

// newWrites builds apiextensions-apiserver's semantics of custom
// resources beside upstream's of every built-in resource (s.Semantics,
// built first for the admission chain), the field managers and the REST
// handlers.
func (s *Set) newWrites(cfg Config, d Deps) error {
	restMetrics, err := rest.NewMetrics(d.Metrics)
	if err != nil {
		return err
	}
	fields, err := s.newFieldManager(s.typeConverter)
	if err != nil {
		return err
	}
	s.fields = fields
	b := d.Backend
	// Custom resources get apiextensions-apiserver's semantics, the
	// others the built-in ones.
	conv, err := crconvert.New(crconvert.Config{Logger: d.Logger, Services: services{b}})
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	sem, err := customresource.New(b.Registry, s.Semantics, conv)
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	crFields, err := customresource.NewFieldManagers(sem, fields)
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	s.REST, err = rest.New(s.base, rest.Config{
		Registry: b.Registry, Ranges: b.Ranges, Store: b.Store, Cache: s.Router, Metrics: restMetrics,
		Revisions: b.Revisions, Hub: s.Hub, Codec: s.Codec, StorageCodec: b.Codec, ServiceIPs: b.ServiceIPs, NodePorts: b.NodePorts,
		Logger: d.Logger, MinWatchTimeout: cfg.MinWatchTimeout, BookmarkInterval: cfg.BookmarkInterval,
		ConsistentReadFallback: rest.Fallback(cfg.ConsistentReadFallback),
		Admission:              s.Chain,
		Semantics:              sem,
		FieldManager:           crFields,
	})
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	return nil
}

// newFieldManager builds the field managers of managedFields and
// server-side apply over upstream's scheme and strategies, with tc, the
// type converter of the built-in kinds from upstream's OpenAPI
// definitions.
func (s *Set) newFieldManager(tc managedfields.TypeConverter) (*fieldmanager.Managers, error) {
	fm, err := fieldmanager.New(fieldmanager.Config{Scheme: s.Semantics.Scheme(), TypeConverter: tc, ResetFields: s.Semantics.ResetFields})
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	return fm, nil
}

// Bootstrap writes the objects kube-apiserver creates at startup (system
// namespaces, default RBAC, ...) unless they exist.
func (s *Set) Bootstrap(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var err error
	s.step("started", "bootstrap", func() {
		err = bootstrap.Ensure(ctx, s.backend.Store, s.backend.Registry, s.Semantics)
	})
	return err
}

// Start starts the background parts in order: access (the RBAC feed),
// admission (its feeds and periodic jobs), guard (audit writer,
// certificate reload), this gateway's apiserver identity and endpoint
// leases (it serves on listen), the APIService feed and the fetching of
// the extension servers' discovery, the cluster-wide controllers (their
// election).
func (s *Set) Start(listen net.Addr) {
	s.step("started", "access", s.Access.Start)
	s.step("started", "admission", s.Chain.Start)
	if s.Flow != nil {
		s.step("started", "priority and fairness", s.Flow.Start)
	}
	s.step("started", "guard", s.Guard.Start)
	s.step("started", "leases", func() { s.startKeepers(listen) })
	s.step("started", "apiservices", s.apiServices.Start)
	s.step("started", "aggregator discovery", s.Aggregator.Start)
	s.step("started", "controllers", s.Controllers.Start)
}

// Self is this gateway's advertised IP and port, once Start knows them.
func (s *Set) Self() (netip.Addr, int, bool) {
	ap := s.self.Load()
	if ap == nil {
		return netip.Addr{}, 0, false
	}
	return ap.Addr(), int(ap.Port()), true
}

// startKeepers keeps this gateway's apiserver identity Lease and its
// key among the kubernetes Service's endpoints while it runs.
func (s *Set) startKeepers(listen net.Addr) {
	ap, err := advertised(s.advertise, listen)
	if err != nil {
		s.log.Error("cannot keep the apiserver identity and endpoint leases", "err", err)
		return
	}
	s.self.Store(&ap)
	b := s.backend
	id, err := apiserverid.New(apiserverid.Config{Store: b.Store, Registry: b.Registry, Logger: s.log.With("component", "apiserverid"), Advertise: ap.String()})
	if err != nil {
		s.log.Error("cannot keep the apiserver identity lease", "err", err)
		return
	}
	leases, err := kubernetesservice.NewLeases(b.Etcd, b.Codec, 0)
	if err != nil {
		s.log.Error("cannot keep the apiserver endpoint lease", "err", err)
		return
	}
	ep, err := kubernetesservice.NewKeeper(leases, ap.Addr(), 0, s.log.With("component", "endpointlease"))
	if err != nil {
		s.log.Error("cannot keep the apiserver endpoint lease", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopKeep = cancel
	s.keepers.Go(func() { id.Run(ctx) })
	s.keepers.Go(func() { ep.Run(ctx) })
}

// advertised is the address other members reach this gateway at: the
// configured IP (or the listen IP, or the host's default interface when
// that is unspecified, as kube-apiserver picks its advertise address) and
// the listen port.
func advertised(ip netip.Addr, listen net.Addr) (netip.AddrPort, error) {
	tcp, ok := listen.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("cannot tell the advertised address: listening on %v", listen)
	}
	if !ip.IsValid() && !tcp.IP.IsUnspecified() {
		// Bound to one address: the gateway is reachable there only
		// (upstream's ResolveBindAddress would pick the host's interface
		// for a loopback bind, where nothing listens).
		ip, _ = netip.AddrFromSlice(tcp.IP)
	}
	if !ip.IsValid() {
		host, err := utilnet.ResolveBindAddress(tcp.IP)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("cannot tell the advertised address: %w", err)
		}
		var ok bool
		if ip, ok = netip.AddrFromSlice(host); !ok {
			return netip.AddrPort{}, fmt.Errorf("cannot tell the advertised address of %v", host)
		}
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(tcp.Port)), nil
}

// authTrust is what the extension-apiserver-authentication ConfigMap
// says of this gateway: its client CA and, with a front-proxy CA, the
// request-header settings as the authenticator applies them.
func authTrust(c access.Config) authtrust.Info {
	rh := c.RequestHeader
	info := authtrust.Info{ClientCAFile: c.ClientCAFile, RequestHeaderCAFile: rh.ClientCAFile}
	if rh.ClientCAFile == "" {
		return info
	}
	or := func(v, def []string) []string {
		if len(v) == 0 {
			return def
		}
		return v
	}
	info.AllowedNames, info.UIDHeaders = rh.AllowedNames, rh.UIDHeaders
	info.UsernameHeaders = or(rh.UsernameHeaders, authn.DefaultUsernameHeaders)
	info.GroupHeaders = or(rh.GroupHeaders, authn.DefaultGroupHeaders)
	info.ExtraHeaderPrefixes = or(rh.ExtraHeaderPrefixes, authn.DefaultExtraHeaderPrefixes)
	return info
}

// Stopping is nil until Stop starts, then the reason.
func (s *Set) Stopping() error { return s.base.Err() }

// Base is cancelled when Stop starts.
func (s *Set) Base() context.Context { return s.base }

// Drain starts the shutdown: it ends watches and other streams (Base)
// and withdraws the gateway's endpoint lease, so that the kubernetes
// Service stops sending new connections here; ordinary requests in flight
// go on (their contexts do not end with Base) and every part they need
// still runs until Stop. It may be called more than once.
func (s *Set) Drain() {
	s.drainOnce.Do(func() {
		s.cancelBase()
		if s.stopKeep != nil {
			s.step("stopped", "leases", func() { s.stopKeep(); s.keepers.Wait() })
		}
	})
}

// Stop drains (Drain), then stops the controllers, the admission and RBAC feeds, the hub, the router and the OpenAPI
// renderer, in reverse order of start. Requests in flight may still
// finish. Parts New did not get to build are skipped.
func (s *Set) Stop() {
	s.stopOnce.Do(func() {
		s.Drain()
		if s.Controllers != nil {
			s.step("stopped", "controllers", s.Controllers.Close)
		}
		if s.apiServices != nil {
			s.step("stopped", "apiservices", func() { _ = s.apiServices.Close() })
		}
		if s.Flow != nil {
			s.step("stopped", "priority and fairness", s.Flow.Close)
		}
		if s.Chain != nil {
			s.step("stopped", "admission", s.Chain.Close)
		}
		if s.Access != nil {
			s.step("stopped", "access", s.Access.Close)
		}
		if s.Hub != nil {
			s.step("stopped", "watch hub", func() { s.Hub.Close() })
		}
		if s.Router != nil {
			s.step("stopped", "router", func() { s.Router.Close() })
		}
		if s.OpenAPI != nil {
			s.step("stopped", "openapi", func() { s.OpenAPI.Close() })
		}
	})
}

// Close stops (Stop), waits at most grace for the watch streams, which
// run on hijacked connections the server's shutdown does not wait for,
// then closes the guard (audit writer, certificate reloader). It may be
// called more than once.
func (s *Set) Close(grace time.Duration) {
	s.Stop()
	if s.REST != nil {
		s.step("stopped", "watch streams", func() {
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := s.REST.WaitWatches(ctx); err != nil {
				s.log.Error("cannot stop watch streams", "err", err)
			}
		})
	}
	if s.Kubelet != nil {
		// Proxied sessions run on hijacked connections too.
		s.step("stopped", "proxied sessions", func() {
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := s.Kubelet.Wait(ctx); err != nil {
				s.log.Error("cannot stop proxied sessions", "err", err)
			}
		})
	}
	if s.Aggregator != nil {
		s.step("stopped", "aggregated requests", func() {
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := s.Aggregator.Wait(ctx); err != nil {
				s.log.Error("cannot stop aggregated requests", "err", err)
			}
		})
	}
	if s.Guard != nil {
		s.step("stopped", "guard", s.Guard.Close)
	}
}

// step runs one start or stop step and logs how long it took.
func (s *Set) step(what, name string, f func()) {
	t0 := time.Now()
	f()
	s.log.Debug("gateway "+what, "step", name, "took", time.Since(t0))
}

// directoryReplicas routes reads to the ready replicas the directory
// knows, best first.
type directoryReplicas struct{ d *directory.Directory }

func (r directoryReplicas) Replicas(rangeID string) []string {
	ready := r.d.Ready(rangeID)
	out := make([]string, 0, len(ready))
	for _, rep := range ready {
		out = append(out, rep.ReadAddr)
	}
	return out
}

// services reads the Services of conversion webhooks' service
// references from etcd.
type services struct{ b *backend.Backend }

func (s services) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	res, ok := s.b.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("services"))
	if !ok {
		return nil, errors.New("services are not served")
	}
	obj, err := s.b.Store.Get(ctx, res, namespace, name, 0)
	if err != nil {
		return nil, err
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("cannot read service %s/%s: got %T", namespace, name, obj)
	}
	return svc, nil
}
