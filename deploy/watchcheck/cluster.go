package watchcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/ranges"
)

// Config configures a Cluster.
type Config struct {
	// Dir keeps etcd's data and the certificates. Required.
	Dir string
	// Logger is required.
	Logger *slog.Logger
	// BookmarkInterval of watches. Default 300ms.
	BookmarkInterval time.Duration
	// ProgressInterval of the cache node. Default 200ms.
	ProgressInterval time.Duration
	// Window bounds the cache node's windows. Zero MaxAge is one hour, so
	// that a soak run never loses events to age.
	Window cachenode.WindowConfig
	// ReadDelay, when set, puts a proxy between the gateway and the cache
	// node's read API that holds each request for ReadDelay(path) first:
	// slow window reads on demand.
	ReadDelay func(path string) time.Duration
}

// NodeStart is one start of the cache node.
type NodeStart struct {
	// Began is when the node before it began to stop (zero for the
	// first start): a 410 after it may come from this start's window.
	Began time.Time
	// WindowFrom is where the ConfigMaps range's window begins: it holds
	// every event after WindowFrom, and nothing older.
	WindowFrom int64
}

// Cluster is kgate in one process — embedded etcd, embedded NATS, one cache
// node and one gateway over HTTPS — wired like deploy/devcluster, except
// that the NATS server and the cache node can be stopped and started again
// on the same addresses, and the node's NATS messages can be dropped.
type Cluster struct {
	// stack holds Truth, Registry, Ranges and Bundle.
	stack
	cfg Config
	// RangeID is the range of ConfigMaps.
	RangeID string
	// Metrics is the gateway's registry (watch hub metrics included).
	Metrics *prometheus.Registry

	natsPort int
	nodeConn *nats.Conn
	gwConn   *nats.Conn

	drop atomic.Pointer[func(*event.Event) bool] // the node's publish filter

	nodeMu     sync.Mutex // guards node, nodeCancel, nodeDone, starts
	nodeAddr   string
	node       *cachenode.Node
	nodeCancel context.CancelFunc
	nodeDone   chan error
	starts     []NodeStart

	probe  *client.Client // ours, to find window bounds
	proxy  *http.Server   // ReadDelay's, between the gateway and the node
	gw     *gateway.Gateway
	gwStop context.CancelFunc
	gwDone chan error
}

// Start starts every component and returns once the gateway serves.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := defaults(cfg.Dir, cfg.Logger, &cfg.BookmarkInterval, &cfg.ProgressInterval, &cfg.Window); err != nil {
		return nil, err
	}
	c := &Cluster{stack: stack{log: cfg.Logger}, cfg: cfg, Metrics: prometheus.NewRegistry()}
	return startOrClose(ctx, c.log, c, c.start)
}

func (c *Cluster) start(ctx context.Context) (err error) {
	log := c.log
	if err := c.startStores(ctx, c.cfg.Dir); err != nil {
		return err
	}
	u, err := url.Parse(c.nats.ClientURL())
	if err != nil {
		return fmt.Errorf("cannot parse NATS URL: %w", err)
	}
	if c.natsPort, err = strconv.Atoi(u.Port()); err != nil {
		return fmt.Errorf("cannot parse NATS port: %w", err)
	}
	// The node's connection does not buffer while reconnecting: what it
	// publishes during a NATS outage is lost (as when a long outage
	// overflows the buffer), so a restart leaves gaps to repair.
	if c.nodeConn, err = nats.Connect(c.nats.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1)); err != nil {
		return fmt.Errorf("cannot connect to NATS: %w", err)
	}
	if c.gwConn, err = nats.Connect(c.nats.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond)); err != nil {
		return fmt.Errorf("cannot connect to NATS: %w", err)
	}

	if err := c.openStorage(ranges.Config{}); err != nil {
		return err
	}
	rng, ok := c.Ranges.Lookup(c.Resource.Key("default", "x"))
	if !ok {
		return errors.New("cannot find the range of configmaps")
	}
	c.RangeID = rng.ID

	// The read API's address is fixed before the first start: restarts
	// listen on it again and the clients keep using it.
	if c.nodeAddr, err = freeAddr(); err != nil {
		return err
	}
	if c.probe, err = client.New(client.Config{Addr: c.nodeAddr}); err != nil {
		return err
	}
	if err := c.StartNode(ctx); err != nil {
		return err
	}

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	if err := c.prepareGateways(c.cfg.Dir, addr); err != nil {
		return err
	}
	readAddr := c.nodeAddr
	if c.cfg.ReadDelay != nil {
		if readAddr, err = c.startProxy(); err != nil {
			return err
		}
	}
	if c.gw, err = gateway.New(gateway.Config{
		Listen: addr, TLS: c.tls, CacheNodes: []string{readAddr},
		Auth:  gateway.AuthConfig{ClientCAFile: c.Bundle.CAFile},
		Build: "watchcheck", BookmarkInterval: c.cfg.BookmarkInterval,
	}, gateway.Deps{
		Backend: c.storage, NATS: c.gwConn,
		Logger: log.With("component", "gateway"), Metrics: c.Metrics, Gatherer: c.Metrics,
	}); err != nil {
		return err
	}
	c.gwStop, c.gwDone = goRun(c.gw.Run)
	select {
	case <-c.gw.Ready():
	case err := <-c.gwDone:
		c.gwDone <- err
		return fmt.Errorf("cannot start gateway: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// startProxy serves a delaying reverse proxy of the node's read API and
// returns its address.
func (c *Cluster) startProxy() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: c.nodeAddr})
	rp.ErrorLog = log.New(io.Discard, "", 0) // a cancelled read is no news
	c.proxy = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(c.cfg.ReadDelay(r.URL.Path))
		rp.ServeHTTP(w, r)
	})}
	go c.proxy.Serve(ln)
	return ln.Addr().String(), nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// SetDrop makes the cache node drop the NATS message of every event (and
// progress message) for which drop returns true; nil drops none.
func (c *Cluster) SetDrop(drop func(*event.Event) bool) {
	if drop == nil {
		c.drop.Store(nil)
		return
	}
	c.drop.Store(&drop)
}

func (c *Cluster) publishFilter(ev *event.Event) bool {
	if d := c.drop.Load(); d != nil {
		return !(*d)(ev)
	}
	return true
}

// StopNATS stops the NATS server; clients keep trying to reconnect.
func (c *Cluster) StopNATS() error { return c.stopNATS() }

// StartNATS starts the NATS server again on its port.
func (c *Cluster) StartNATS() error {
	c.natsMu.Lock()
	defer c.natsMu.Unlock()
	var err error
	for range 50 {
		if c.nats, err = natsembed.Start(natsembed.Config{Port: c.natsPort, Logger: c.log.With("component", "nats")}); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // the port may not be free yet
	}
	return err
}

// StopNode stops the cache node: its read API stops listening and its
// window is gone.
func (c *Cluster) StopNode() error {
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	if c.node == nil {
		return nil
	}
	c.starts = append(c.starts, NodeStart{Began: time.Now()})
	c.nodeCancel()
	err := <-c.nodeDone
	c.node = nil
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("cache node: %w", err)
	}
	return nil
}

// StartNode starts a cache node on the read API address of the previous
// one (the gateway's client reconnects to it), waits until it is ready and
// records where its window begins.
func (c *Cluster) StartNode(ctx context.Context) error {
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	var (
		node *cachenode.Node
		err  error
	)
	for range 50 {
		node, err = cachenode.New(cachenode.Config{
			Etcd: c.Etcd, NATS: c.nodeConn, Registry: c.Registry, Codec: c.Codec, Ranges: c.Ranges,
			Listen: c.nodeAddr, Window: c.cfg.Window, ProgressInterval: c.cfg.ProgressInterval,
			Logger:        c.log.With("component", "cachenode"),
			PublishFilter: c.publishFilter,
		})
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // the port may not be free yet
	}
	if err != nil {
		return err
	}
	cancel, done := goRun(node.Run)
	c.node, c.nodeCancel, c.nodeDone = node, cancel, done
	stopped, err := waitReady(ctx, "cache node", node.Ready, done)
	if stopped {
		c.node = nil
	}
	if err != nil {
		return err
	}
	if len(c.starts) == 0 {
		c.starts = append(c.starts, NodeStart{})
	}
	from, err := c.windowFrom(ctx)
	if err != nil {
		return err
	}
	c.starts[len(c.starts)-1].WindowFrom = from
	return nil
}

// windowFrom finds the oldest revision the node's window answers events
// after: reads after an older one are storage.ErrCompacted.
func (c *Cluster) windowFrom(ctx context.Context) (int64, error) {
	resp, err := c.Etcd.Get(ctx, "/kgate-watchcheck-probe")
	if err != nil {
		return 0, err
	}
	lo, hi := int64(0), resp.Header.Revision // the answer lies in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		_, _, err := c.probe.Events(ctx, c.RangeID, mid)
		switch {
		case err == nil:
			hi = mid
		case errors.Is(err, storage.ErrCompacted):
			lo = mid + 1
		default:
			return 0, fmt.Errorf("cannot probe the window: %w", err)
		}
	}
	return lo, nil
}

// NodeStarts returns every start of the cache node, oldest first.
func (c *Cluster) NodeStarts() []NodeStart {
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	return append([]NodeStart(nil), c.starts...)
}

// Kubeconfig is the admin kubeconfig's path.
func (c *Cluster) Kubeconfig() string { return c.Bundle.KubeconfigFile }

// RESTConfig returns a client config for the admin user with userAgent,
// speaking protobuf when asked, without client-side rate limits.
func (c *Cluster) RESTConfig(userAgent string, protobuf bool) (*rest.Config, error) {
	return restConfig(c.Bundle.KubeconfigFile, "", userAgent, protobuf)
}

// restConfig loads the admin kubeconfig, with host (when set) as the
// server, userAgent, protobuf when asked, and no client-side rate limits.
func restConfig(kubeconfig, host, userAgent string, protobuf bool) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig: %w", err)
	}
	if host != "" {
		cfg.Host = "https://" + host
	}
	cfg.UserAgent = userAgent
	cfg.QPS, cfg.Burst = 10000, 20000
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return cfg, nil
}

// Counter sums every series of the counter or gauge name in the
// gateway's metrics.
func (c *Cluster) Counter(name string) float64 { return sumMetric(c.Metrics, name, nil) }

// StopGateway stops the gateway as SIGTERM does and returns when its Run
// has returned. The gateway is not started again.
func (c *Cluster) StopGateway() error {
	if c.gwStop == nil {
		return nil
	}
	c.gwStop()
	c.gwStop = nil
	if err := <-c.gwDone; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Close stops everything in reverse order of start.
func (c *Cluster) Close() error {
	var errs []error
	if err := c.StopGateway(); err != nil {
		errs = append(errs, err)
	}
	if err := c.StopNode(); err != nil {
		errs = append(errs, err)
	}
	if c.proxy != nil {
		c.proxy.Close()
	}
	if c.probe != nil {
		c.probe.Close()
	}
	for _, nc := range []*nats.Conn{c.gwConn, c.nodeConn} {
		if nc != nil {
			nc.Close()
		}
	}
	return c.stack.close(errs)
}
