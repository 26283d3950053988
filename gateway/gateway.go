// Package gateway is kgate's front door: a fasthttp server over TLS that
// authenticates each request, parses it into Kubernetes request attributes,
// serves discovery and OpenAPI from pre-rendered bytes, and hands resource
// requests to the REST handlers (reads from cache nodes, watches from NATS,
// writes to etcd). Errors from every layer become a metav1.Status here, in
// one place.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/gateway/internal/access"
	"github.com/kgate/kgate/gateway/internal/aggregator"
	"github.com/kgate/kgate/gateway/internal/components"
	"github.com/kgate/kgate/gateway/internal/guard"
	"github.com/kgate/kgate/gateway/internal/kubeletproxy"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/readiness"
	"github.com/kgate/kgate/gateway/internal/reqmetrics"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/registry"
)

// DefaultMaxRequestBodyBytes is kube-apiserver's limit on request bodies.
const DefaultMaxRequestBodyBytes = 3 << 20

// DefaultShutdownGrace is Config.ShutdownGrace's default.
const DefaultShutdownGrace = 10 * time.Second

// DefaultKubernetesVersion is the Kubernetes API version kgate serves.
const DefaultKubernetesVersion = "v1.37.2"

// The settings of the gateway's parts, as kube-apiserver's flags.
type (
	// AuthConfig: authentication and authorization (--client-ca-file,
	// --authorization-mode, --service-account-*, --oidc-*, ...).
	AuthConfig                 = access.Config
	AuthorizationWebhookConfig = access.AuthorizationWebhookConfig
	OIDCConfig                 = access.OIDCConfig
	RequestHeaderConfig        = access.RequestHeaderConfig
	// AuditConfig, LimitsConfig, ServingTLSConfig: README "Operations".
	AuditConfig      = guard.AuditConfig
	LimitsConfig     = guard.LimitsConfig
	ServingTLSConfig = guard.ServingTLSConfig
	// KubeletConfig: the kubelet proxies (--kubelet-client-certificate,
	// --kubelet-client-key, --kubelet-certificate-authority,
	// --kubelet-preferred-address-types).
	KubeletConfig = kubeletproxy.Config
	// AggregatorConfig: the proxy to extension API servers
	// (--proxy-client-cert-file, --enable-aggregator-routing).
	AggregatorConfig = aggregator.Config
)

// EnsureServiceAccountSigningKey writes a new service-account signing key
// (RSA, PEM, mode 0600) to file unless the file exists, and checks that
// it loads. kgate dev keeps one in its data directory.
func EnsureServiceAccountSigningKey(file string) error {
	return access.EnsureServiceAccountSigningKey(file)
}

// OIDCSigningAlgs are the algorithms OIDCConfig.SigningAlgs may name.
func OIDCSigningAlgs() []string { return access.OIDCSigningAlgs() }

// Config are a gateway's settings.
type Config struct {
	// Listen is the host:port to serve HTTPS on.
	Listen string
	// AdvertiseAddress is the IP cluster members reach this gateway at
	// (kube-apiserver's --advertise-address): the kubernetes Service's
	// endpoint. Default: the listen IP, or the host's default interface.
	AdvertiseAddress string
	// TLS is the serving configuration; it must not offer h2.
	TLS *tls.Config
	// CacheNodes are the read API addresses of the cache nodes serving
	// every range, best first (one node, or a fixed set). Ignored when
	// Deps.Directory is set.
	CacheNodes []string
	// CacheNodeTLS, when set, reads the cache nodes over TLS with it (the
	// internal plane's client side, pki.InternalTLS.Client); nil reads
	// them over plain HTTP.
	CacheNodeTLS *tls.Config
	// Replicas is the number of owners per range, for the status
	// endpoint. Default 2.
	Replicas int
	// KubernetesVersion is the Kubernetes version the gateway speaks, as
	// /version reports it. Default DefaultKubernetesVersion.
	KubernetesVersion string
	// Build is kgate's own version, added to /version as build metadata.
	Build string
	// MaxRequestBodyBytes: larger bodies get 413. Default 3 MiB.
	MaxRequestBodyBytes int
	// ConsistentReadFallback is what a consistent read does when the cache
	// cannot reach etcd's revision in time: "reject" (429 with
	// Retry-After, the default) or "etcd" (read etcd instead).
	ConsistentReadFallback string
	// MinWatchTimeout, BookmarkInterval: see rest.Config.
	MinWatchTimeout  time.Duration
	BookmarkInterval time.Duration
	// ShutdownGrace bounds how long Run waits for requests in flight after
	// its context ends. Default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Profiling serves Go's profiles at /debug/pprof/ (kube-apiserver's
	// --profiling), to whom RBAC lets get those non-resource URLs
	// (cluster-admin).
	Profiling bool
	// ShutdownDelay is how long Run keeps serving after its context ends,
	// with /readyz failing (its shutdown check) and /livez passing, so that
	// load balancers and Endpoints stop sending new connections before the
	// server stops accepting (kube-apiserver's --shutdown-delay-duration).
	// Zero: no delay.
	ShutdownDelay time.Duration
	// QuotaRecountInterval, when positive, recounts every ResourceQuota's
	// status.used from the objects this often (kube-controller-manager's
	// resourcequota resync). Zero: off.
	QuotaRecountInterval time.Duration
	// EnableAdmissionPlugins and DisableAdmissionPlugins change the
	// admission plugins run from kube-apiserver 1.37's default set, by
	// upstream's names (--enable-admission-plugins,
	// --disable-admission-plugins); an unknown name fails New.
	EnableAdmissionPlugins, DisableAdmissionPlugins []string

	// Auth is authentication and authorization.
	Auth AuthConfig
	// Audit writes audit.k8s.io/v1 events; off without a policy file.
	Audit AuditConfig
	// Limits are the in-flight, per-user rate, watch and list-bytes
	// limits; zero values disable each.
	Limits LimitsConfig
	// ServingTLS reloads the serving certificate from files and sets the
	// TLS version and cipher suites on TLS.
	ServingTLS ServingTLSConfig
	// Kubelet configures pods/log, exec, attach, portforward, pods/proxy
	// and nodes/proxy.
	Kubelet KubeletConfig
	// Aggregator configures the proxy to non-local APIServices.
	Aggregator AggregatorConfig
}

// Deps are the built objects a gateway runs on. The caller owns them:
// Close leaves them open.
type Deps struct {
	// Backend is the storage stack; required.
	Backend *backend.Backend
	// NATS carries the watch feeds; required.
	NATS *nats.Conn
	// Directory tells which cache nodes serve each range (scale-out);
	// without it reads go to Config.CacheNodes.
	Directory *directory.Directory
	// Members is the cluster membership, for the status endpoint.
	// Optional.
	Members members
	// Logger is required. Metrics is where the gateway registers its
	// metrics; Gatherer serves /metrics. Both required.
	Logger   *slog.Logger
	Metrics  prometheus.Registerer
	Gatherer prometheus.Gatherer
}

func validate(c *Config, d *Deps) error {
	switch {
	case c.Listen == "" || c.TLS == nil:
		return errors.New("cannot make gateway: Listen and TLS are required")
	case d.Backend == nil || d.NATS == nil || (len(c.CacheNodes) == 0 && d.Directory == nil):
		return errors.New("cannot make gateway: the backend, NATS and cache nodes (or a directory) are required")
	case d.Logger == nil || d.Metrics == nil || d.Gatherer == nil:
		return errors.New("cannot make gateway: Logger, Metrics and Gatherer are required")
	case c.ShutdownDelay < 0:
		return errors.New("cannot make gateway: ShutdownDelay must not be negative")
	}
	for _, p := range c.TLS.NextProtos {
		if p == "h2" {
			return errors.New("cannot make gateway: fasthttp serves HTTP/1.1 only, do not offer h2")
		}
	}
	if c.Replicas <= 0 {
		c.Replicas = 2
	}
	if c.KubernetesVersion == "" {
		c.KubernetesVersion = DefaultKubernetesVersion
	}
	if c.MaxRequestBodyBytes <= 0 {
		c.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	return nil
}

// Gateway serves the Kubernetes API.
type Gateway struct {
	cfg Config
	d   Deps
	log *slog.Logger
	reg *registry.Registry
	c   *components.Set // what the pipeline serves with

	// The request pipeline (pipeline.go), each step behind the interface
	// it declares.
	authn   authenticator
	guard   requestGuard
	authz   authorizer
	reviews reviews
	rest    resources
	connect connects
	// aggregate serves the requests of non-local APIServices.
	aggregate aggregated
	checks    []check // /readyz, /healthz (health.go)
	// stopping is set when Run's context ends: /readyz fails from then on,
	// through the shutdown delay and the drain.
	stopping atomic.Bool

	codec   *negotiate.Codec    // writes errors (errors.go)
	metrics *reqmetrics.Metrics // counts every request
	server  *fasthttp.Server

	mu       sync.Mutex // guards listener
	listener net.Listener
	ready    chan struct{} // closed once listening
}

// New builds a gateway; Run serves it, Close releases what New built.
func New(cfg Config, d Deps) (*Gateway, error) {
	if err := validate(&cfg, &d); err != nil {
		return nil, err
	}
	c, err := components.New(components.Config{
		TLS: cfg.TLS, CacheNodes: cfg.CacheNodes, CacheNodeTLS: cfg.CacheNodeTLS, KubernetesVersion: cfg.KubernetesVersion, Build: cfg.Build,
		ConsistentReadFallback: cfg.ConsistentReadFallback, MinWatchTimeout: cfg.MinWatchTimeout,
		BookmarkInterval: cfg.BookmarkInterval, QuotaRecountInterval: cfg.QuotaRecountInterval,
		EnableAdmissionPlugins: cfg.EnableAdmissionPlugins, DisableAdmissionPlugins: cfg.DisableAdmissionPlugins,
		Auth: cfg.Auth, Audit: cfg.Audit, Limits: cfg.Limits, ServingTLS: cfg.ServingTLS, Kubelet: cfg.Kubelet,
		AdvertiseAddress: cfg.AdvertiseAddress,
		Aggregator:       cfg.Aggregator,
	}, components.Deps{
		Backend: d.Backend, NATS: d.NATS, Directory: d.Directory, Logger: d.Logger, Metrics: d.Metrics, Gatherer: d.Gatherer,
	})
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, d: d, log: d.Logger, reg: d.Backend.Registry, c: c, ready: make(chan struct{})}
	g.authn, g.guard, g.authz, g.reviews, g.rest, g.connect = c.Access, c.Guard, c.Access, c.Access, c.REST, c.Kubelet
	g.aggregate = c.Aggregator
	g.codec, g.metrics = c.Codec, c.Metrics
	g.checks = g.readyChecks()
	g.server = &fasthttp.Server{
		Handler:            g.handle,
		ErrorHandler:       g.readError,
		Name:               "kgate",
		MaxRequestBodySize: cfg.MaxRequestBodyBytes,
		ReadTimeout:        5 * time.Minute,
		IdleTimeout:        90 * time.Second,
		// fasthttp's worker-pool cleaner sleeps this long between passes
		// and ends only after a pass: 5 s (default 10 s) lets Close's
		// goroutine check see it gone, and idle workers are freed sooner.
		MaxIdleWorkerDuration:         5 * time.Second,
		DisablePreParseMultipartForm:  true,
		NoDefaultServerHeader:         true,
		DisableHeaderNamesNormalizing: false,
		Logger:                        fasthttpLogger{d.Logger},
	}
	return g, nil
}

// Addr returns the address the gateway listens on, once Run has started
// listening (Ready is closed).
func (g *Gateway) Addr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.listener == nil {
		return ""
	}
	return g.listener.Addr().String()
}

// Serving reports whether the gateway can serve reads: every range of the
// current table has a cache node replica it knows ready.
func (g *Gateway) Serving(ctx context.Context) error {
	return g.c.Router.Ready(ctx, readiness.IDs(g.d.Backend.Ranges.Current().All()))
}

// Ready is closed once the gateway accepts connections.
func (g *Gateway) Ready() <-chan struct{} { return g.ready }

// Run serves until ctx ends, then reports not ready and keeps serving for
// ShutdownDelay, then stops accepting, ends watches (with a final bookmark
// for those that asked for bookmarks) and waits for requests in flight, at
// most ShutdownGrace. A gateway runs once: when
// Run returns, for whatever reason, everything New built is closed.
func (g *Gateway) Run(ctx context.Context) error {
	defer g.Close()
	if err := g.c.Bootstrap(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", g.cfg.Listen, err)
	}
	g.c.Start(ln.Addr())
	ln = guard.TrackConns(ln)
	g.mu.Lock()
	g.listener = ln
	g.mu.Unlock()
	close(g.ready)
	g.log.Info("gateway serving", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- g.server.Serve(tls.NewListener(ln, g.c.TLS)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("cannot serve: %w", err)
	case <-ctx.Done():
	}
	g.stopping.Store(true)
	if g.cfg.ShutdownDelay > 0 {
		g.log.Info("gateway shutting down: not ready, still serving", "delay", g.cfg.ShutdownDelay)
		delay := time.NewTimer(g.cfg.ShutdownDelay)
		select {
		case <-delay.C:
		case err := <-errc:
			delay.Stop()
			return fmt.Errorf("cannot serve: %w", err)
		}
	}
	// Streams end and the endpoint lease goes; the requests in flight
	// finish (at most ShutdownGrace) before the parts they use stop
	// (g.Close, deferred).
	g.c.Drain()
	t0 := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownGrace)
	defer cancel()
	if err := g.server.ShutdownWithContext(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cannot shut down: %w", err)
	}
	// Shutdown closes only the listeners Serve has registered: a context
	// ended right after Ready can come before Serve registered its own,
	// which would then accept forever.
	ln.Close()
	<-errc
	g.log.Debug("gateway stopped", "step", "server", "took", time.Since(t0))
	return nil
}

// Close releases what New built: feeds, hub, router, audit writer and
// certificate reloader, and waits for the watch streams to end. Run
// closes the gateway when it returns; Close is for a gateway that does
// not run. It may be called more than once.
func (g *Gateway) Close() error {
	g.c.Close(g.cfg.ShutdownGrace)
	return nil
}

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug(fmt.Sprintf(format, args...), "component", "fasthttp")
}
