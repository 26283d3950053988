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
	"github.com/kgate/kgate/gateway/internal/admission/chain"
	"github.com/kgate/kgate/gateway/internal/bootstrap"
	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/discovery"
	"github.com/kgate/kgate/gateway/internal/fieldmanager"
	"github.com/kgate/kgate/gateway/internal/guard"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/openapi"
	"github.com/kgate/kgate/gateway/internal/reqmetrics"
	"github.com/kgate/kgate/gateway/internal/rest"
	"github.com/kgate/kgate/gateway/internal/route"
	"github.com/kgate/kgate/gateway/internal/watchhub"
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
	// TLS is the serving configuration; it must not offer h2.
	TLS *tls.Config
	// CacheNodes are the read API addresses of the cache nodes serving
	// every range, best first (one node, or a fixed set). Ignored when
	// Deps.Directory is set.
	CacheNodes []string
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

	// The request pipeline (pipeline.go), each step behind the interface
	// it declares.
	authn   authenticator
	guard   requestGuard
	authz   authorizer
	reviews reviews
	rest    resources
	checks  []check // /readyz, /healthz (health.go)

	discovery *discovery.Discovery
	openapi   *openapi.Documents
	codec     *negotiate.Codec
	metrics   *reqmetrics.Metrics
	server    *fasthttp.Server

	// The components New builds, closed in reverse order.
	access *access.Access
	chain  *chain.Admission
	sem    *builtin.Semantics // upstream's write semantics (rest, bootstrap)
	guards *guard.Guard
	hub    *watchhub.Hub
	router *route.Router
	tls    *tls.Config
	// watches are rest's watch streams on hijacked connections, which
	// the server's shutdown does not wait for: Close does.
	watches interface{ WaitWatches(context.Context) error }

	base       context.Context // cancelled when shutdown starts: ends watches
	cancelBase context.CancelFunc
	stopOnce   sync.Once // stopBackground
	// stopping is set when Run's context ends: /readyz fails from then on,
	// through the shutdown delay and the drain.
	stopping atomic.Bool

	mu       sync.Mutex // guards listener
	listener net.Listener
	ready    chan struct{} // closed once listening
}

// New builds a gateway; Run serves it, Close releases what New built.
func New(cfg Config, d Deps) (_ *Gateway, err error) {
	if err := validate(&cfg, &d); err != nil {
		return nil, err
	}
	b := d.Backend
	g := &Gateway{cfg: cfg, d: d, log: d.Logger, reg: b.Registry, ready: make(chan struct{})}
	g.base, g.cancelBase = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	v, err := discovery.NewVersion(cfg.KubernetesVersion, cfg.Build)
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.discovery, err = discovery.New(b.Registry, v); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.openapi, err = openapi.New(b.Registry, v); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.codec, err = negotiate.NewCodec(b.Registry.Scheme()); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.metrics, err = reqmetrics.New(d.Metrics, d.Gatherer); err != nil {
		return nil, err
	}
	if err := g.newReads(); err != nil {
		return nil, err
	}
	if g.access, err = access.New(cfg.Auth, access.Deps{
		Registry: b.Registry, Ranges: b.Ranges, Codec: b.Codec, Store: b.Store, Cache: g.router, Hub: g.hub,
		Revisions: b.Revisions, Negotiate: g.codec, Logger: d.Logger, Metrics: d.Metrics,
	}); err != nil {
		return nil, err
	}
	if g.chain, err = chain.New(chain.Config{QuotaRecountInterval: cfg.QuotaRecountInterval}, chain.Deps{
		Registry: b.Registry, Ranges: b.Ranges, Codec: b.Codec, Store: b.Store, Cache: g.router, Hub: g.hub,
		Revisions: b.Revisions, Authorizer: g.access.Authorizer(), Escalation: g.access.Escalation(), Logger: d.Logger,
	}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.guards, err = guard.New(guard.Config{
		Audit: cfg.Audit, Limits: cfg.Limits, ServingTLS: cfg.ServingTLS, RequestHeaderClientCAFile: cfg.Auth.RequestHeader.ClientCAFile,
	}, guard.Deps{TLS: cfg.TLS, NATS: d.NATS, Base: g.base, Logger: d.Logger, Metrics: d.Metrics}); err != nil {
		return nil, err
	}
	g.tls = g.guards.TLS()
	restMetrics, err := rest.NewMetrics(d.Metrics)
	if err != nil {
		return nil, err
	}
	// Upstream's semantics of every built-in resource, whether served now
	// or added to the registry later; others get upstream's generic
	// metadata rules (rest).
	if g.sem, err = builtin.New(registry.Builtin()); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	fields, err := g.newFieldManager()
	if err != nil {
		return nil, err
	}
	rh, err := rest.New(g.base, rest.Config{
		Registry: b.Registry, Ranges: b.Ranges, Store: b.Store, Cache: g.router, Metrics: restMetrics,
		Revisions: b.Revisions, Hub: g.hub, Codec: g.codec, StorageCodec: b.Codec, ServiceIPs: b.ServiceIPs,
		Logger: d.Logger, MinWatchTimeout: cfg.MinWatchTimeout, BookmarkInterval: cfg.BookmarkInterval,
		ConsistentReadFallback: rest.Fallback(cfg.ConsistentReadFallback),
		Admission:              g.chain,
		Semantics:              g.sem,
		FieldManager:           fields,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	g.authn, g.guard, g.authz, g.reviews, g.rest = g.access, g.guards, g.access, g.access, rh
	g.watches = rh
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

// newFieldManager builds the field managers of managedFields and
// server-side apply over upstream's scheme and strategies, with the type
// converter built once, here, from upstream's OpenAPI definitions (its
// duration is logged).
func (g *Gateway) newFieldManager() (*fieldmanager.Managers, error) {
	sem := g.sem
	t0 := time.Now()
	tc, err := fieldmanager.NewTypeConverter(sem.Scheme())
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	g.log.Info("built the field manager's type converter", "took", time.Since(t0).Round(time.Millisecond))
	fm, err := fieldmanager.New(fieldmanager.Config{Scheme: sem.Scheme(), TypeConverter: tc, ResetFields: sem.ResetFields})
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	return fm, nil
}

// newReads builds the read path: the router to cache node replicas and
// the watch hub over NATS.
func (g *Gateway) newReads() error {
	hubMetrics, err := watchhub.NewMetrics(g.d.Metrics)
	if err != nil {
		return err
	}
	routeMetrics, err := route.NewMetrics(g.d.Metrics)
	if err != nil {
		return err
	}
	var replicas route.Replicas = route.Static(g.cfg.CacheNodes)
	if g.d.Directory != nil {
		replicas = directoryReplicas{g.d.Directory}
	}
	if g.router, err = route.New(route.Config{Replicas: replicas, Metrics: routeMetrics}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.hub, err = watchhub.New(watchhub.Config{NATS: g.d.NATS, Source: g.router, Ranges: g.d.Backend.Ranges, Logger: g.log.With("component", "watchhub"), Metrics: hubMetrics}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	return nil
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
	return g.router.Ready(ctx, rangeIDs(g.d.Backend.Ranges.Current().All()))
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
	t0 := time.Now()
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := bootstrap.Ensure(bctx, g.d.Backend.Store, g.reg, g.sem)
	cancel()
	if err != nil {
		return err
	}
	g.log.Debug("gateway started", "step", "bootstrap", "took", time.Since(t0))
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", g.cfg.Listen, err)
	}
	// In order; stopBackground and Close stop them in reverse.
	g.step("started", "access", g.access.Start)
	g.step("started", "admission", g.chain.Start)
	g.step("started", "guard", g.guards.Start)
	ln = guard.TrackConns(ln)
	g.mu.Lock()
	g.listener = ln
	g.mu.Unlock()
	close(g.ready)
	g.log.Info("gateway serving", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- g.server.Serve(tls.NewListener(ln, g.tls)) }()
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
	g.stopBackground()
	t0 = time.Now()
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

// step runs one start or stop step and logs how long it took.
func (g *Gateway) step(what, name string, f func()) {
	t0 := time.Now()
	f()
	g.log.Debug("gateway "+what, "step", name, "took", time.Since(t0))
}

// stopBackground starts the shutdown: it ends watches (base), then stops
// the admission and RBAC feeds, the hub and the router, in reverse order
// of start. Requests in flight may still finish. Parts New did not get to
// build are skipped.
func (g *Gateway) stopBackground() {
	g.stopOnce.Do(func() {
		g.cancelBase()
		if g.chain != nil {
			g.step("stopped", "admission", g.chain.Close)
		}
		if g.access != nil {
			g.step("stopped", "access", g.access.Close)
		}
		if g.hub != nil {
			g.step("stopped", "watch hub", func() { g.hub.Close() })
		}
		if g.router != nil {
			g.step("stopped", "router", func() { g.router.Close() })
		}
		if g.openapi != nil {
			g.step("stopped", "openapi", func() { g.openapi.Close() })
		}
	})
}

// Close releases what New built: feeds, hub, router, audit writer and
// certificate reloader, and waits for the watch streams to end. Run
// closes the gateway when it returns; Close is for a gateway that does
// not run. It may be called more than once.
func (g *Gateway) Close() error {
	g.stopBackground()
	if g.watches != nil {
		// fasthttp's Shutdown does not wait for hijacked connections:
		// the watch streams, ended by stopBackground, are waited for here.
		g.step("stopped", "watch streams", func() {
			ctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownGrace)
			defer cancel()
			if err := g.watches.WaitWatches(ctx); err != nil {
				g.log.Error("cannot stop watch streams", "err", err)
			}
		})
	}
	if g.guards != nil {
		g.step("stopped", "guard", g.guards.Close)
	}
	return nil
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

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Debug(fmt.Sprintf(format, args...), "component", "fasthttp")
}
