// Package role composes kgate's two production roles from their parts, the
// same way for `kgate cachenode`, `kgate gateway` and the multi-node
// `kgate dev`:
//
//   - a cache node: membership (gossip), the directory of who serves what,
//     its own status announcements, the placement deciding which ranges it
//     reflects and publishes, and the node itself;
//   - a gateway: membership, the directory (to route reads to ready
//     replicas), and the HTTPS gateway.
package role

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/cachenode/placement"
	"github.com/kgate/kgate/gateway"
)

// Membership configures a role's place in the gossip cluster.
type Membership struct {
	// Name is the member's unique name; cache nodes should keep theirs
	// across restarts (ranges are assigned by name).
	Name string
	// Bind is the gossip address (host:port; port 0 picks a free one).
	Bind string
	// Advertise is the address others reach this member at (optional).
	Advertise string
	// Join lists members (or a headless Service's DNS name) to join.
	Join []string
	// Timing of failure detection; zero fields take LAN values.
	Timing cluster.Timing
	// Keys encrypt gossip, the first the primary (cluster.Config.Keys);
	// empty: plaintext.
	Keys [][]byte
}

// CacheNodeConfig configures a cache node role.
type CacheNodeConfig struct {
	// Node configures the cache node; its Placement is set here.
	Node       cachenode.Config
	Membership Membership
	// Replicas is how many cache nodes own each range; default 2.
	Replicas int
	Logger   *slog.Logger
	Metrics  prometheus.Registerer // nil registers none
}

// CacheNode is a running cache node with its membership.
type CacheNode struct {
	Node    *cachenode.Node
	Members *cluster.Cluster
	dir     *directory.Directory
	pub     *directory.Publisher
	place   *placement.Placement
}

// NewCacheNode builds a cache node role; Run starts it.
func NewCacheNode(cfg CacheNodeConfig) (*CacheNode, error) {
	if cfg.Logger == nil {
		return nil, errors.New("cannot make cache node role: Logger is required")
	}
	c := &CacheNode{}
	var err error
	if c.Node, err = cachenode.New(cfg.Node); err != nil {
		return nil, err
	}
	if c.Members, err = cluster.New(cluster.Config{
		Name: cfg.Membership.Name, Role: cluster.RoleCacheNode, BindAddr: cfg.Membership.Bind,
		AdvertiseAddr: cfg.Membership.Advertise, Join: cfg.Membership.Join, ReadAddr: c.Node.Addr(),
		Timing: cfg.Membership.Timing, Keys: cfg.Membership.Keys, Logger: cfg.Logger.With("component", "cluster"), Metrics: cfg.Metrics,
	}); err != nil {
		c.Node.Close()
		return nil, err
	}
	if c.dir, err = directory.New(directory.Config{NATS: cfg.Node.NATS, Logger: cfg.Logger.With("component", "directory"), Metrics: cfg.Metrics}); err != nil {
		c.close()
		return nil, err
	}
	if c.place, err = placement.New(placement.Config{Members: c.Members, Directory: c.dir, Replicas: cfg.Replicas}); err != nil {
		c.close()
		return nil, err
	}
	if err := c.Node.SetPlacement(c.place); err != nil {
		c.close()
		return nil, err
	}
	if c.pub, err = directory.NewPublisher(directory.PublisherConfig{
		NATS: cfg.Node.NATS, Node: c.Members.LocalName(), ReadAddr: c.Members.Local().ReadAddr, Epoch: c.Members.Local().Epoch,
		Source: c.status, Logger: cfg.Logger.With("component", "directory"),
	}); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *CacheNode) status() []directory.RangeStatus {
	st := c.Node.Status()
	out := make([]directory.RangeStatus, len(st))
	for i, s := range st {
		out[i] = directory.RangeStatus{ID: s.ID, Ready: s.Ready, Seen: s.Seen, Primary: s.Primary}
	}
	return out
}

// Close releases a cache node role that will not run.
func (c *CacheNode) Close() { c.close() }

func (c *CacheNode) close() {
	c.Node.Close()
	if c.Members != nil {
		c.Members.Close()
	}
}

// Name is the node's member name.
func (c *CacheNode) Name() string { return c.Members.LocalName() }

// Run runs every part until ctx ends or one fails.
func (c *CacheNode) Run(ctx context.Context) error {
	return RunAll(ctx, map[string]func(context.Context) error{
		"membership": c.Members.Run, "directory": c.dir.Run, "placement": c.place.Run,
		"status": c.pub.Run, "cache node": c.Node.Run,
	})
}

// GatewayConfig configures a gateway role.
type GatewayConfig struct {
	// Gateway configures the gateway; Deps are what it runs on (their
	// Directory and Members are set here).
	Gateway    gateway.Config
	Deps       gateway.Deps
	Membership Membership
	Logger     *slog.Logger
	Metrics    prometheus.Registerer // nil registers none
}

// Gateway is a running gateway with its membership.
type Gateway struct {
	Gateway *gateway.Gateway
	Members *cluster.Cluster
	dir     *directory.Directory
}

// NewGateway builds a gateway role; Run starts it.
func NewGateway(cfg GatewayConfig) (*Gateway, error) {
	if cfg.Logger == nil {
		return nil, errors.New("cannot make gateway role: Logger is required")
	}
	g := &Gateway{}
	var err error
	if g.dir, err = directory.New(directory.Config{NATS: cfg.Deps.NATS, Logger: cfg.Logger.With("component", "directory"), Metrics: cfg.Metrics}); err != nil {
		return nil, err
	}
	if g.Members, err = cluster.New(cluster.Config{
		Name: cfg.Membership.Name, Role: cluster.RoleGateway, BindAddr: cfg.Membership.Bind,
		AdvertiseAddr: cfg.Membership.Advertise, Join: cfg.Membership.Join,
		Timing: cfg.Membership.Timing, Keys: cfg.Membership.Keys, Logger: cfg.Logger.With("component", "cluster"), Metrics: cfg.Metrics,
	}); err != nil {
		return nil, err
	}
	d := cfg.Deps
	d.Directory, d.Members = g.dir, g.Members
	if g.Gateway, err = gateway.New(cfg.Gateway, d); err != nil {
		g.Members.Close()
		return nil, err
	}
	return g, nil
}

// Directory is what the gateway knows of who serves what.
func (g *Gateway) Directory() *directory.Directory { return g.dir }

// Run runs every part until ctx ends or one fails. The membership and
// the directory outlive the gateway's own shutdown (its delay and drain,
// during which it still serves reads): they stop once it has returned.
func (g *Gateway) Run(ctx context.Context) error {
	parts, stopParts := context.WithCancel(context.WithoutCancel(ctx))
	defer stopParts()
	return RunAll(parts, map[string]func(context.Context) error{
		"membership": g.Members.Run, "directory": g.dir.Run,
		"gateway": func(failed context.Context) error {
			gctx, cancel := context.WithCancel(failed) // another part failed
			defer cancel()
			defer context.AfterFunc(ctx, cancel)() // or the caller stops the role
			err := g.Gateway.Run(gctx)
			if err == nil {
				stopParts() // the gateway is done: the others follow
			}
			return err
		},
	})
}

// RunAll runs parts until ctx ends or one fails, then stops them all and
// returns the first failure.
func RunAll(ctx context.Context, parts map[string]func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for name, run := range parts {
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("cannot run %s: %w", name, err)
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}
