// Package devcluster runs all of kgate in one process — embedded etcd,
// embedded NATS, a cache node and a gateway, with a self-signed CA and an
// admin kubeconfig — for `kgate dev`, for a laptop and for tests. Each part
// is the same component production runs, wired over the same interfaces
// (the gateway reads the cache node over its HTTP read API and NATS).
//
// The internal plane is closed as in production unless InsecureInternal:
// etcd requires client certificates, NATS requires TLS and each role's
// credentials (and allows each role only its subjects), the read API
// requires a gateway or cache-node certificate, and gossip is encrypted.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/cachenode/natsmetrics"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/deploy/role"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/embedded"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// Config configures an all-in-one kgate.
type Config struct {
	// DataDir keeps etcd's data, the certificates and the kubeconfig
	// across restarts. Required.
	DataDir string
	// Listen is the gateway's HTTPS address. Default 127.0.0.1:6443.
	Listen string
	// EtcdClientAddr is the embedded etcd's client address; port 0 picks
	// a free port. Default 127.0.0.1:0.
	EtcdClientAddr string
	// TokenAuthFile is a kube-apiserver token file (token,user,uid,"groups")
	// accepted besides client certificates signed by the dev CA.
	TokenAuthFile string
	// AnonymousAuth lets requests without credentials in as
	// system:anonymous.
	AnonymousAuth bool
	// Build is kgate's version, shown in /version.
	Build string
	// BookmarkInterval and MinWatchTimeout tune watches (tests shorten
	// them); zero keeps kube-apiserver's defaults.
	BookmarkInterval time.Duration
	MinWatchTimeout  time.Duration
	// ServiceCIDR is the range Service cluster IPs come from. Default
	// ipalloc.DefaultCIDR.
	ServiceCIDR string
	// NodePortRange is the range Service node ports come from. Default
	// portalloc.DefaultRange.
	NodePortRange string
	// CacheNodes and Gateways are how many of each run (default 1 each).
	// Gateways listen on consecutive ports from Listen; the kubeconfig
	// names the first.
	CacheNodes int
	Gateways   int
	// Replicas is how many cache nodes own each range (default 2).
	Replicas int
	// Resources are the served resources, shared by every member; default
	// registry.NewBuiltin(). Resources added or removed at run time are
	// served or dropped by every member.
	Resources *registry.Registry
	// Splits splits ranges further (see ranges.ParseSplits); default none
	// for one cache node, ranges.DefaultSplits for more.
	Splits *ranges.Config
	// Window bounds each cache node's event windows (zero: defaults).
	Window cachenode.WindowConfig
	// EtcdCompactionInterval, when positive, compacts etcd on this
	// interval (kube-apiserver's --etcd-compaction-interval; `kgate dev`
	// defaults it to 5m); zero: off.
	EtcdCompactionInterval time.Duration
	// EventTTL, when positive, is how long events live after their last
	// write (kube-apiserver's --event-ttl; `kgate dev` defaults it to 1h);
	// zero: until deleted.
	EventTTL time.Duration
	// EncryptionProviderConfig is kube-apiserver's EncryptionConfiguration
	// file (--encryption-provider-config); empty: values in the clear.
	EncryptionProviderConfig string
	// StorageMediaType is how built-in objects are stored
	// (--storage-media-type); default protobuf.
	StorageMediaType string
	// UnsafeNoFsync skips etcd's fsync (tests).
	UnsafeNoFsync bool
	// InsecureInternal runs the internal plane in plaintext without
	// credentials (logged as a warning).
	InsecureInternal bool
	// InternalDir holds the internal plane's certificates, credentials
	// and gossip key (pki.EnsureInternal); default DataDir/internal.
	// Tests share one across clusters to make them once.
	InternalDir string
	// Logger is required.
	Logger *slog.Logger

	// Authentication and authorization (see gateway.Config).
	// AuthorizationModes default to RBAC.
	AuthorizationModes []string
	// AuthorizationWebhook configures mode Webhook.
	AuthorizationWebhook gateway.AuthorizationWebhookConfig
	// ServiceAccountSigningKeyFile signs service-account tokens; default
	// DataDir/sa.key, generated at the first start.
	ServiceAccountSigningKeyFile string
	// ServiceAccountKeyFiles verify them besides the signing key.
	ServiceAccountKeyFiles []string
	// ServiceAccountIssuers default to DefaultServiceAccountIssuer.
	ServiceAccountIssuers []string
	// APIAudiences default to the issuers.
	APIAudiences []string
	// OIDC and RequestHeader go to every gateway (see gateway.Config):
	// OIDC ID tokens and front-proxy identity headers. The serving TLS
	// advertises the request-header CAs besides the dev CA.
	OIDC          gateway.OIDCConfig
	RequestHeader gateway.RequestHeaderConfig

	// Profiling serves /debug/pprof/ on the gateways (gateway.Config).
	Profiling bool
	// QuotaRecountInterval recounts the ResourceQuotas this often (see
	// gateway.Config); zero keeps them as admission charges them.
	QuotaRecountInterval time.Duration
	// EnableAdmissionPlugins and DisableAdmissionPlugins go to every
	// gateway (see gateway.Config).
	EnableAdmissionPlugins, DisableAdmissionPlugins []string

	// Audit, Limits and ServingTLS go to every gateway (see
	// gateway.Config). ServingTLS's files default to the dev serving
	// pair, reloaded when replaced.
	Audit      gateway.AuditConfig
	Limits     gateway.LimitsConfig
	ServingTLS gateway.ServingTLSConfig
	// Kubelet goes to every gateway: the kubelet proxies' settings.
	Kubelet gateway.KubeletConfig
	// Aggregator goes to every gateway: the proxy to extension servers.
	Aggregator gateway.AggregatorConfig
}

// Cluster is a running all-in-one kgate.
type Cluster struct {
	cfg    Config
	Bundle *pki.Bundle
	// Internal is the internal plane's files; nil when InsecureInternal.
	Internal   *pki.Internal
	internal   internalPlane
	Registry   *prometheus.Registry // every component's metrics, labelled by component
	etcd       *embedded.Server
	etcdClient *clientv3.Client
	nats       *natsembed.Server
	conns      []*nats.Conn
	storage    *backend.Backend
	Nodes      []*role.CacheNode
	Gateways   []*role.Gateway

	cancel   context.CancelFunc
	wg       sync.WaitGroup // the roles' Run goroutines
	failed   chan struct{}  // closed when a role fails
	failOnce sync.Once
	done     chan struct{} // closed when every role has stopped, once started
	mu       sync.Mutex    // guards errs
	errs     []error
}

// Start starts every component and returns once the gateway serves.
// Close stops them in reverse order.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.DataDir == "" || cfg.Logger == nil {
		return nil, errors.New("cannot start kgate dev: DataDir and Logger are required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:6443"
	}
	if cfg.EtcdClientAddr == "" {
		cfg.EtcdClientAddr = "127.0.0.1:0"
	}
	if cfg.CacheNodes <= 0 {
		cfg.CacheNodes = 1
	}
	if cfg.Gateways <= 0 {
		cfg.Gateways = 1
	}
	c := &Cluster{cfg: cfg, Registry: prometheus.NewRegistry(), failed: make(chan struct{}), done: make(chan struct{})}
	if err := c.start(ctx); err != nil {
		// Stop what did start; the start error is the one to report.
		if cerr := c.Close(); cerr != nil {
			cfg.Logger.Warn("cannot stop after a failed start", "err", cerr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) (err error) {
	cfg := c.cfg
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	log := cfg.Logger
	t0 := time.Now()
	if err := c.startInternal(); err != nil {
		return err
	}
	if c.etcd, err = embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(cfg.DataDir, "etcd"), ClientAddr: cfg.EtcdClientAddr, PeerAddr: "127.0.0.1:0",
		UnsafeNoFsync: cfg.UnsafeNoFsync, Logger: log.With("component", "etcd"), ClientTLS: c.internal.etcdServer,
	}); err != nil {
		return err
	}
	log.Info("etcd started", "endpoints", c.etcd.Endpoints(), "took", time.Since(t0))
	if c.etcdClient, err = clientv3.New(clientv3.Config{
		Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: c.internal.etcdClient,
	}); err != nil {
		return fmt.Errorf("cannot connect to etcd: %w", err)
	}
	t0 = time.Now()
	if c.nats, err = natsembed.Start(natsembed.Config{
		Logger: log.With("component", "nats"), TLS: c.internal.natsServer, Users: c.internal.natsUsers,
	}); err != nil {
		return err
	}
	log.Info("nats started", "url", c.nats.ClientURL(), "took", time.Since(t0))

	splits := ranges.Config{}
	if cfg.Splits != nil {
		splits = *cfg.Splits
	} else if cfg.CacheNodes > 1 {
		splits = ranges.DefaultSplits()
	}
	var values *encryption.Transformers
	if cfg.EncryptionProviderConfig != "" {
		if values, err = encryption.Load(ctx, cfg.EncryptionProviderConfig); err != nil {
			return err
		}
	}
	t0 = time.Now()
	if c.storage, err = backend.Open(backend.Config{Etcd: c.etcdClient, Registry: cfg.Resources, Splits: splits, ServiceCIDR: cfg.ServiceCIDR, NodePortRange: cfg.NodePortRange,
		CompactionInterval: cfg.EtcdCompactionInterval, EventTTL: cfg.EventTTL, MediaType: cfg.StorageMediaType, Transformers: values, Logger: log,
		Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"component": "storage"}, c.Registry)}); err != nil {
		return err
	}
	log.Info("storage opened", "took", time.Since(t0))
	b := c.storage
	fast := cluster.Fast()
	var seeds []string
	t0 = time.Now()
	for i := range cfg.CacheNodes {
		name := fmt.Sprintf("cachenode-%d", i)
		nc, err := c.connect(name, pki.RoleCacheNode)
		if err != nil {
			return err
		}
		node, err := role.NewCacheNode(role.CacheNodeConfig{
			Node: cachenode.Config{
				Etcd: c.etcdClient, NATS: nc, Registry: b.Registry, Codec: b.Codec, Ranges: b.Ranges, Listen: "127.0.0.1:0",
				Window: cfg.Window, TLS: c.internal.readServer, Transformers: values,
				Logger:  log.With("component", "cachenode", "node", name),
				Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"cachenode": name}, c.Registry),
			},
			Membership: role.Membership{Name: name, Bind: "127.0.0.1:0", Join: seeds, Timing: fast, Keys: c.internal.gossipKeys},
			Replicas:   cfg.Replicas,
			Logger:     log.With("node", name),
			Metrics:    prometheus.WrapRegistererWith(prometheus.Labels{"member": name}, c.Registry),
		})
		if err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, node)
		seeds = append(seeds, node.Members.Addr())
		c.run(runCtx, name, node.Run)
	}
	for _, n := range c.Nodes {
		if err := c.waitNode(ctx, n); err != nil {
			return fmt.Errorf("cannot start cache node %s: %w", n.Name(), err)
		}
	}
	log.Info("cache nodes ready", "nodes", len(c.Nodes), "ranges", len(b.Ranges.Current().All()), "took", time.Since(t0))

	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot use listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("cannot use listen address %q: %w", cfg.Listen, err)
	}
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if host != "" && host != "127.0.0.1" && host != "localhost" && host != "::1" {
		hosts = append(hosts, host)
	}
	if c.Bundle, err = pki.Ensure(pki.Config{Dir: cfg.DataDir, Hosts: hosts, ServerURL: "https://" + cfg.Listen}); err != nil {
		return err
	}
	tlsCfg, err := c.Bundle.ServingTLS()
	if err != nil {
		return err
	}
	c.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := cfg.serviceAccountDefaults(); err != nil {
		return err
	}
	servingTLS := cfg.ServingTLS
	if servingTLS.CertFile == "" && servingTLS.KeyFile == "" {
		servingTLS.CertFile, servingTLS.KeyFile = c.Bundle.ServingCertFile, c.Bundle.ServingKeyFile
	}
	t0 = time.Now()
	for i := range cfg.Gateways {
		name := fmt.Sprintf("gateway-%d", i)
		nc, err := c.connect(name, pki.RoleGateway)
		if err != nil {
			return err
		}
		gw, err := role.NewGateway(role.GatewayConfig{
			Gateway: gateway.Config{
				Listen: net.JoinHostPort(host, strconv.Itoa(port+i)), TLS: tlsCfg, CacheNodeTLS: c.internal.readClient,
				Replicas: cfg.Replicas, Build: cfg.Build, BookmarkInterval: cfg.BookmarkInterval, MinWatchTimeout: cfg.MinWatchTimeout,
				Auth: gateway.AuthConfig{
					ClientCAFile: c.Bundle.CAFile, TokenAuthFile: cfg.TokenAuthFile, AnonymousAuth: cfg.AnonymousAuth,
					AuthorizationModes: cfg.AuthorizationModes, ServiceAccountIssuers: cfg.ServiceAccountIssuers, APIAudiences: cfg.APIAudiences,
					AuthorizationWebhook:   cfg.AuthorizationWebhook,
					ServiceAccountKeyFiles: cfg.ServiceAccountKeyFiles, ServiceAccountSigningKeyFile: cfg.ServiceAccountSigningKeyFile,
					// kgate dev has no controller manager to do it.
					AggregateClusterRoles: true,
					OIDC:                  cfg.OIDC, RequestHeader: cfg.RequestHeader,
				},
				QuotaRecountInterval: cfg.QuotaRecountInterval, Profiling: cfg.Profiling,
				EnableAdmissionPlugins: cfg.EnableAdmissionPlugins, DisableAdmissionPlugins: cfg.DisableAdmissionPlugins,
				Audit: cfg.Audit, Limits: cfg.Limits, ServingTLS: servingTLS,
				Kubelet:    cfg.Kubelet,
				Aggregator: cfg.Aggregator,
			},
			Deps: gateway.Deps{
				Backend: b, NATS: nc, Logger: log.With("component", "gateway", "gateway", name),
				Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"gateway": name}, c.Registry), Gatherer: c.Registry,
			},
			Membership: role.Membership{Name: name, Bind: "127.0.0.1:0", Join: seeds, Timing: fast, Keys: c.internal.gossipKeys},
			Logger:     log.With("gateway", name),
			Metrics:    prometheus.WrapRegistererWith(prometheus.Labels{"member": name}, c.Registry),
		})
		if err != nil {
			return err
		}
		c.Gateways = append(c.Gateways, gw)
		c.run(runCtx, name, gw.Run)
		select {
		case <-gw.Gateway.Ready():
		case <-c.failed:
			return fmt.Errorf("cannot start gateway %s: %w", name, c.err())
		}
	}
	if err := c.waitServing(ctx); err != nil {
		return err
	}
	log.Info("gateways serving", "gateways", len(c.Gateways), "took", time.Since(t0))
	go func() { c.wg.Wait(); close(c.done) }()
	log.Info("kgate dev ready", "addr", c.Addr(), "kubeconfig", c.Bundle.KubeconfigFile,
		"cachenodes", len(c.Nodes), "gateways", len(c.Gateways))
	return nil
}

// connect opens a NATS connection for one member, its metrics labelled
// with the member's name.
func (c *Cluster) connect(name, role string) (*nats.Conn, error) {
	m, err := natsmetrics.New(prometheus.WrapRegistererWith(prometheus.Labels{"member": name}, c.Registry), c.cfg.Logger.With("component", name))
	if err != nil {
		return nil, err
	}
	opts := append(c.internal.natsOptions(role), m.Options()...)
	nc, err := nats.Connect(c.nats.ClientURL(), append(opts, nats.Name("kgate-"+name), nats.MaxReconnects(-1))...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	m.Attach(nc)
	c.conns = append(c.conns, nc)
	return nc, nil
}

// run runs a role; the first failure stops the cluster.
func (c *Cluster) run(ctx context.Context, name string, f func(context.Context) error) {
	c.wg.Go(func() {
		if err := f(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Error("component failed", "component", name, "err", err)
			c.mu.Lock()
			c.errs = append(c.errs, fmt.Errorf("%s: %w", name, err))
			c.mu.Unlock()
			c.failOnce.Do(func() { close(c.failed) })
			c.cancel()
		}
	})
}

// waitServing waits until every gateway knows a ready replica of every
// range (the gateways learn it from the cache nodes' announcements).
func (c *Cluster) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, gw := range c.Gateways {
		for {
			if err := gw.Gateway.Serving(ctx); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cannot start kgate dev: gateways do not see every range served: %w", ctx.Err())
			case <-c.failed:
				return fmt.Errorf("cannot start kgate dev: %w", c.err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

func (c *Cluster) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

// waitNode waits until a cache node is ready, or a role failed.
func (c *Cluster) waitNode(ctx context.Context, n *role.CacheNode) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.failed:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := n.Node.WaitReady(ctx)
	select {
	case <-c.failed:
		return errors.New("stopped before ready")
	default:
	}
	return err
}

// Addr is the first gateway's HTTPS address.
func (c *Cluster) Addr() string { return c.Gateways[0].Gateway.Addr() }

// Kubeconfig is the path of the admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.Bundle.KubeconfigFile }

// EtcdClient is a client of the embedded etcd (tests use it to look
// behind the API).
func (c *Cluster) EtcdClient() *clientv3.Client { return c.etcdClient }

// Done is closed when every gateway and cache node has stopped.
func (c *Cluster) Done() <-chan struct{} { return c.done }

// Close stops everything in reverse order of start.
func (c *Cluster) Close() error {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	if c.storage != nil {
		c.storage.Close()
	}
	for _, nc := range c.conns {
		nc.Close()
	}
	if c.nats != nil {
		c.nats.Close()
	}
	if c.etcdClient != nil {
		c.etcdClient.Close()
	}
	if c.etcd != nil {
		if err := c.etcd.Close(); err != nil {
			c.errs = append(c.errs, err)
		}
	}
	return c.err()
}
