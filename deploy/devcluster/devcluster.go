// Package devcluster runs all of kgate in one process — embedded etcd,
// embedded NATS, a cache node and a gateway, with a self-signed CA and an
// admin kubeconfig — for `kgate dev`, for a laptop and for tests. Each part
// is the same component production runs, wired over the same interfaces
// (the gateway reads the cache node over its HTTP read API and NATS).
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/cachenode/ranges"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/embedded"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/revision"
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
	// UnsafeNoFsync skips etcd's fsync (tests).
	UnsafeNoFsync bool
	// Logger is required.
	Logger *slog.Logger
}

// Cluster is a running all-in-one kgate.
type Cluster struct {
	cfg        Config
	Bundle     *pki.Bundle
	Registry   *prometheus.Registry
	etcd       *embedded.Server
	etcdClient *clientv3.Client
	nats       *natsembed.Server
	nodeConn   *nats.Conn
	gwConn     *nats.Conn
	node       *cachenode.Node
	oracle     *revision.Oracle
	gw         *gateway.Gateway

	cancel   context.CancelFunc
	running  bool          // the goroutine closing done was started
	nodeDone chan error    // the cache node's Run result, once it runs
	done     chan struct{} // closed when every component has stopped
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
	c := &Cluster{cfg: cfg, Registry: prometheus.NewRegistry(), done: make(chan struct{})}
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
	if c.etcd, err = embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(cfg.DataDir, "etcd"), ClientAddr: cfg.EtcdClientAddr, PeerAddr: "127.0.0.1:0",
		UnsafeNoFsync: cfg.UnsafeNoFsync, Logger: log.With("component", "etcd"),
	}); err != nil {
		return err
	}
	log.Info("etcd started", "endpoints", c.etcd.Endpoints(), "took", time.Since(t0))
	if c.etcdClient, err = clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		return fmt.Errorf("cannot connect to etcd: %w", err)
	}
	t0 = time.Now()
	if c.nats, err = natsembed.Start(natsembed.Config{Logger: log.With("component", "nats")}); err != nil {
		return err
	}
	if c.nodeConn, err = nats.Connect(c.nats.ClientURL(), nats.Name("kgate-cachenode"), nats.MaxReconnects(-1)); err != nil {
		return fmt.Errorf("cannot connect to NATS: %w", err)
	}
	if c.gwConn, err = nats.Connect(c.nats.ClientURL(), nats.Name("kgate-gateway"), nats.MaxReconnects(-1)); err != nil {
		return fmt.Errorf("cannot connect to NATS: %w", err)
	}
	log.Info("nats started", "url", c.nats.ClientURL(), "took", time.Since(t0))

	reg, err := registry.NewBuiltin()
	if err != nil {
		return err
	}
	cdc := codec.New(reg.Scheme())
	table, err := ranges.Default(reg)
	if err != nil {
		return err
	}
	t0 = time.Now()
	if c.node, err = cachenode.New(cachenode.Config{
		Etcd: c.etcdClient, NATS: c.nodeConn, Registry: reg, Codec: cdc, Ranges: table,
		Listen: "127.0.0.1:0", Logger: log.With("component", "cachenode"), Metrics: c.Registry,
	}); err != nil {
		return err
	}
	nodeDone := make(chan error, 1)
	c.nodeDone = nodeDone
	go func() { nodeDone <- c.node.Run(runCtx) }()
	if err := waitReady(ctx, c.node.Ready, nodeDone); err != nil {
		return fmt.Errorf("cannot start cache node: %w", err)
	}
	log.Info("cache node ready", "addr", c.node.Addr(), "ranges", len(table.All()), "took", time.Since(t0))

	host, _, err := net.SplitHostPort(cfg.Listen)
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
	store, err := storage.New(storage.Config{Client: c.etcdClient, Registry: reg, Codec: cdc, Logger: log.With("component", "storage")})
	if err != nil {
		return err
	}
	if c.oracle, err = revision.New(revision.Config{KV: c.etcdClient, Logger: log.With("component", "revision")}); err != nil {
		return err
	}
	ips, err := ipalloc.New(ipalloc.Config{Client: c.etcdClient, CIDR: cfg.ServiceCIDR, Logger: log.With("component", "ipalloc")})
	if err != nil {
		return err
	}
	if c.gw, err = gateway.New(gateway.Config{
		Listen: cfg.Listen, TLS: tlsCfg,
		Registry: reg, Codec: cdc, Ranges: table, Store: store, Revisions: c.oracle, CacheNodes: []string{c.node.Addr()}, NATS: c.gwConn, ServiceIPs: ips,
		ClientCAFile: c.Bundle.CAFile, TokenAuthFile: cfg.TokenAuthFile, AnonymousAuth: cfg.AnonymousAuth,
		Build:            cfg.Build,
		BookmarkInterval: cfg.BookmarkInterval, MinWatchTimeout: cfg.MinWatchTimeout,
		Logger: log.With("component", "gateway"), Metrics: c.Registry, Gatherer: c.Registry,
	}); err != nil {
		return err
	}
	gwDone := make(chan error, 1)
	go func() { gwDone <- c.gw.Run(runCtx) }()
	select {
	case <-c.gw.Ready():
	case err := <-gwDone:
		return fmt.Errorf("cannot start gateway: %w", err)
	}
	c.running = true
	go func() {
		// Every component has stopped once both runs returned.
		for _, ch := range []chan error{gwDone, nodeDone} {
			if err := <-ch; err != nil && !errors.Is(err, context.Canceled) {
				c.errs = append(c.errs, err)
			}
		}
		close(c.done)
	}()
	log.Info("kgate dev ready", "addr", c.gw.Addr(), "kubeconfig", c.Bundle.KubeconfigFile)
	return nil
}

func waitReady(ctx context.Context, ready func() bool, done <-chan error) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		select {
		case err := <-done:
			return fmt.Errorf("stopped before ready: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Addr is the gateway's HTTPS address.
func (c *Cluster) Addr() string { return c.gw.Addr() }

// Kubeconfig is the path of the admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.Bundle.KubeconfigFile }

// EtcdClient is a client of the embedded etcd (tests use it to look
// behind the API).
func (c *Cluster) EtcdClient() *clientv3.Client { return c.etcdClient }

// Done is closed when the gateway and cache node have stopped.
func (c *Cluster) Done() <-chan struct{} { return c.done }

// Close stops everything in reverse order of start.
func (c *Cluster) Close() error {
	if c.cancel != nil {
		c.cancel()
	}
	if c.running {
		<-c.done
	} else if c.nodeDone != nil {
		<-c.nodeDone // start failed after the node began running
	}
	if c.oracle != nil {
		c.oracle.Close()
	}
	for _, nc := range []*nats.Conn{c.gwConn, c.nodeConn} {
		if nc != nil {
			nc.Close()
		}
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
	return errors.Join(c.errs...)
}
