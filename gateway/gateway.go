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
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/gateway/internal/authn"
	"github.com/kgate/kgate/gateway/internal/bootstrap"
	"github.com/kgate/kgate/gateway/internal/discovery"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/openapi"
	"github.com/kgate/kgate/gateway/internal/rest"
	"github.com/kgate/kgate/gateway/internal/route"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/revision"
)

// DefaultMaxRequestBodyBytes is kube-apiserver's limit on request bodies.
const DefaultMaxRequestBodyBytes = 3 << 20

// DefaultKubernetesVersion is the Kubernetes API version kgate serves.
const DefaultKubernetesVersion = "v1.37.2"

// Config configures a Gateway.
type Config struct {
	// Listen is the host:port to serve HTTPS on.
	Listen string
	// TLS is the serving configuration; it must not offer h2.
	TLS *tls.Config

	Registry  *registry.Registry
	Codec     *codec.Codec
	Ranges    ranges.Source // a fixed *ranges.Table or a *ranges.Follower
	Store     *storage.Store
	Revisions *revision.Oracle
	NATS      *nats.Conn
	// CacheNodes are the read API addresses of the cache nodes serving
	// every range, best first (one node, or a fixed set). Ignored when
	// Directory is set.
	CacheNodes []string
	// Directory tells which cache nodes serve each range (scale-out).
	Directory *directory.Directory
	// Members is the cluster membership, for the status endpoint; and
	// Replicas the number of owners per range. Optional.
	Members  members
	Replicas int
	// ServiceIPs allocates Service cluster IPs; required.
	ServiceIPs *ipalloc.Allocator

	// ClientCAFile verifies client certificates (x509 authentication).
	ClientCAFile string
	// TokenAuthFile is a kube-apiserver static token file.
	TokenAuthFile string
	// AnonymousAuth admits requests without credentials as
	// system:anonymous.
	AnonymousAuth bool

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
	// its context ends. Default 10s.
	ShutdownGrace time.Duration

	Logger *slog.Logger
	// Metrics is where the gateway registers its metrics; Gatherer serves
	// /metrics. Both required.
	Metrics  prometheus.Registerer
	Gatherer prometheus.Gatherer

	// Authentication and authorization.
	// AuthorizationModes are the --authorization-mode values, asked in
	// order after system:masters: RBAC, AlwaysAllow, AlwaysDeny, Webhook.
	// Default RBAC.
	AuthorizationModes []string
	// AuthorizationWebhook configures mode Webhook (auth.go).
	AuthorizationWebhook AuthorizationWebhookConfig
	// ServiceAccountIssuers are the --service-account-issuer values: the
	// first is written into issued tokens, all are accepted. Required
	// with either key option.
	ServiceAccountIssuers []string
	// ServiceAccountKeyFiles hold the keys verifying service-account
	// tokens (--service-account-key-file); the signing key's public half
	// is added.
	ServiceAccountKeyFiles []string
	// ServiceAccountSigningKeyFile signs TokenRequest tokens
	// (--service-account-signing-key-file); without it TokenRequest is 404.
	ServiceAccountSigningKeyFile string
	// APIAudiences are the audiences of the API (--api-audiences).
	// Default: ServiceAccountIssuers.
	APIAudiences []string
	// AggregateClusterRoles writes the rules of aggregated ClusterRoles
	// into their stored objects (kube-controller-manager's
	// clusterrole-aggregation controller), for clusters without a
	// controller manager. Needs the RBAC mode.
	AggregateClusterRoles bool
	// QuotaRecountInterval, when positive, recounts every ResourceQuota's
	// status.used from the objects this often (kube-controller-manager's
	// resourcequota resync), correcting what admission's bookkeeping
	// missed. Zero: off.
	QuotaRecountInterval time.Duration
	// OIDC accepts ID tokens of an OpenID Connect issuer (--oidc-*).
	OIDC OIDCConfig
	// RequestHeader trusts front proxies' identity headers
	// (--requestheader-*); their CAs are added to TLS.ClientCAs when it
	// has some.
	RequestHeader RequestHeaderConfig

	// Audit, limits and serving TLS (guard.go; README "Operations").
	// Audit writes audit.k8s.io/v1 events; off without a policy file.
	Audit AuditConfig
	// Limits are the in-flight, per-user rate, watch and list-bytes
	// limits; zero values disable each.
	Limits LimitsConfig
	// ServingTLS reloads the serving certificate from files and sets the
	// TLS version and cipher suites on TLS.
	ServingTLS ServingTLSConfig
}

func (c *Config) validate() error {
	switch {
	case c.Listen == "" || c.TLS == nil:
		return errors.New("cannot make gateway: Listen and TLS are required")
	case c.Registry == nil || c.Codec == nil || c.Ranges == nil || c.Store == nil || c.Revisions == nil || (len(c.CacheNodes) == 0 && c.Directory == nil) || c.NATS == nil || c.ServiceIPs == nil:
		return errors.New("cannot make gateway: registry, codec, ranges, store, revisions, cache, NATS and service IPs are required")
	case c.Logger == nil || c.Metrics == nil || c.Gatherer == nil:
		return errors.New("cannot make gateway: Logger, Metrics and Gatherer are required")
	}
	if err := c.validateAuthn(); err != nil {
		return err
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
		c.ShutdownGrace = 10 * time.Second
	}
	return nil
}

// Gateway serves the Kubernetes API.
type Gateway struct {
	cfg       Config
	authn     *authn.Authenticator
	discovery *discovery.Discovery
	openapi   *openapi.Documents
	codec     *negotiate.Codec
	hub       *watchhub.Hub
	router    *route.Router
	rest      *rest.Handler
	metrics   *metrics
	server    *fasthttp.Server

	base       context.Context // cancelled when shutdown starts: ends watches
	cancelBase context.CancelFunc

	mu       sync.Mutex // guards listener
	listener net.Listener
	ready    chan struct{} // closed once listening

	auth authState // authorizer, RBAC feed, service-account tokens, reviews (auth.go)

	guard guardState // audit, fairness, certificate reload (guard.go)
}

// New builds a gateway; Run serves it.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, ready: make(chan struct{})}
	v, err := discovery.NewVersion(cfg.KubernetesVersion, cfg.Build)
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.discovery, err = discovery.New(cfg.Registry, v); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.openapi, err = openapi.New(cfg.Registry, v); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.codec, err = negotiate.NewCodec(cfg.Registry.Scheme()); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.metrics, err = newMetrics(cfg.Metrics, cfg.Gatherer); err != nil {
		return nil, err
	}
	hubMetrics, err := watchhub.NewMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	routeMetrics, err := route.NewMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	restMetrics, err := rest.NewMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	var replicas route.Replicas = route.Static(cfg.CacheNodes)
	if cfg.Directory != nil {
		replicas = directoryReplicas{cfg.Directory}
	}
	if g.router, err = route.New(route.Config{Replicas: replicas, Metrics: routeMetrics}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if g.hub, err = watchhub.New(watchhub.Config{NATS: cfg.NATS, Source: g.router, Ranges: cfg.Ranges, Logger: cfg.Logger.With("component", "watchhub"), Metrics: hubMetrics}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	g.base, g.cancelBase = context.WithCancel(context.Background())
	if err := g.newAuth(); err != nil {
		g.hub.Close()
		return nil, err
	}
	if err := g.newGuard(); err != nil {
		g.hub.Close()
		return nil, err
	}
	g.rest, err = rest.New(g.base, rest.Config{
		Registry: cfg.Registry, Ranges: cfg.Ranges, Store: cfg.Store, Cache: g.router, Metrics: restMetrics,
		Revisions: cfg.Revisions, Hub: g.hub, Codec: g.codec, StorageCodec: cfg.Codec, ServiceIPs: cfg.ServiceIPs,
		Logger: cfg.Logger, MinWatchTimeout: cfg.MinWatchTimeout, BookmarkInterval: cfg.BookmarkInterval,
		ConsistentReadFallback: rest.Fallback(cfg.ConsistentReadFallback),
		Admission:              admission{g},
	})
	if err != nil {
		g.hub.Close()
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	g.server = &fasthttp.Server{
		Handler:                       g.handle,
		ErrorHandler:                  g.readError,
		Name:                          "kgate",
		MaxRequestBodySize:            cfg.MaxRequestBodyBytes,
		ReadTimeout:                   5 * time.Minute,
		IdleTimeout:                   90 * time.Second,
		DisablePreParseMultipartForm:  true,
		NoDefaultServerHeader:         true,
		DisableHeaderNamesNormalizing: false,
		Logger:                        fasthttpLogger{cfg.Logger},
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
	return g.router.Ready(ctx, g.cfg.Ranges.Current())
}

// Ready is closed once the gateway accepts connections.
func (g *Gateway) Ready() <-chan struct{} { return g.ready }

// Run serves until ctx ends, then stops accepting, ends watches (with a
// final bookmark for those that asked for bookmarks) and waits for
// requests in flight, at most ShutdownGrace.
func (g *Gateway) Run(ctx context.Context) error {
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := bootstrap.Ensure(bctx, g.cfg.Store, g.cfg.Registry)
	cancel()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", g.cfg.Listen, err)
	}
	g.startAuth()
	defer g.startGuard()()
	ln = trackConns(ln)
	g.mu.Lock()
	g.listener = ln
	g.mu.Unlock()
	close(g.ready)
	g.cfg.Logger.Info("gateway serving", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- g.server.Serve(tls.NewListener(ln, g.cfg.TLS)) }()
	select {
	case err := <-errc:
		g.shutdown()
		return fmt.Errorf("cannot serve: %w", err)
	case <-ctx.Done():
	}
	g.shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownGrace)
	defer cancel()
	if err := g.server.ShutdownWithContext(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cannot shut down: %w", err)
	}
	<-errc
	return nil
}

func (g *Gateway) shutdown() {
	g.cancelBase()
	g.stopAuth()
	g.hub.Close()
	g.router.Close()
	g.openapi.Close()
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
