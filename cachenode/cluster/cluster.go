// Package cluster is kgate's membership: which gateways and cache nodes
// are alive, learned by gossip (hashicorp/memberlist). Each member carries
// small metadata — its role, the address of its read API and its epoch —
// so that every member can compute the same range assignment
// (ranges.Owners) from the same member list. What each cache node
// actually serves is published separately (package directory).
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// Role is what a member does.
type Role string

const (
	RoleGateway   Role = "gateway"
	RoleCacheNode Role = "cachenode"
)

// ErrMetaTooLarge is returned by New when the member's metadata would not
// fit memberlist's 512-byte limit.
var ErrMetaTooLarge = errors.New("cluster: member metadata too large")

// Config configures a member.
type Config struct {
	// Name is unique in the cluster; default the hostname, '-' and 8 random
	// hex digits. Cache nodes should use a stable name (the StatefulSet
	// pod name): ranges are assigned by name, so a restart under the same
	// name gets the same ranges back.
	Name string
	// Role is required.
	Role Role
	// BindAddr is the gossip address (host:port, UDP and TCP); port 0
	// picks a free one (see Addr). Default "0.0.0.0:7946".
	BindAddr string
	// AdvertiseAddr is the address other members reach this one at
	// (host or host:port); default derived from BindAddr, or a private
	// address of the host when BindAddr is unspecified.
	AdvertiseAddr string
	// Join lists members to join: host:port entries (port defaults to this
	// member's gossip port). A host that is a DNS name — the headless
	// Service of the gossip port — is resolved to its A records (AAAA when
	// there are none) on every attempt. Run retries in the background
	// until it reaches another member; an empty list starts a new cluster.
	Join []string
	// ReadAddr is a cache node's read API address (host:port); required
	// for RoleCacheNode.
	ReadAddr string
	// Timing; zero fields take LAN() values.
	Timing Timing
	// Keys encrypt and authenticate gossip (AES-GCM): the first encrypts,
	// every one decrypts (see ReadKeyFile for rotation). A member without
	// a key of the others' keyring cannot join. Empty: plaintext gossip.
	Keys [][]byte
	// Logger; nil discards. memberlist's own log lines go here at debug.
	Logger *slog.Logger
	// Metrics registers kgate_cluster_members{role}; nil registers none.
	Metrics prometheus.Registerer
}

// Member is an alive member of the cluster.
type Member struct {
	Name     string
	Role     Role   // "" when its metadata could not be read
	Addr     string // gossip address, host:port
	ReadAddr string // cache nodes: read API address
	// Epoch is the member's start time (Unix ns): a member restarted
	// under the same name has a larger epoch.
	Epoch int64
}

// Cluster is this process's membership.
type Cluster struct {
	cfg     Config
	log     *slog.Logger
	meta    []byte
	ml      *memberlist.Memberlist
	metrics *metrics
	changes chan struct{}

	mu      sync.Mutex        // guards members and the lifecycle fields below
	members map[string]Member // alive members, by name
	ran     bool              // Run was called
	closed  bool              // Close was called
	closing chan struct{}     // closed by Close while Run runs
	done    chan struct{}     // closed when Run returns

	stopOnce sync.Once // Leave (maybe) and Shutdown, once
}

// New validates cfg, binds the gossip port and starts gossiping (alone
// until Run joins). Run or Close must follow.
func New(cfg Config) (*Cluster, error) {
	if cfg.Role != RoleGateway && cfg.Role != RoleCacheNode {
		return nil, fmt.Errorf("cannot make cluster member: role %q", cfg.Role)
	}
	if cfg.Role == RoleCacheNode && cfg.ReadAddr == "" {
		return nil, errors.New("cannot make cluster member: a cache node needs ReadAddr")
	}
	if cfg.ReadAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.ReadAddr); err != nil {
			return nil, fmt.Errorf("cannot make cluster member: ReadAddr: %w", err)
		}
	}
	if !cfg.Timing.valid() {
		return nil, errors.New("cannot make cluster member: negative Timing")
	}
	cfg.Timing = cfg.Timing.withDefaults()
	if cfg.Name == "" {
		cfg.Name = defaultName()
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "0.0.0.0:7946"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for _, j := range cfg.Join {
		if _, _, err := splitJoin(j, 1); err != nil {
			return nil, fmt.Errorf("cannot make cluster member: Join %q: %w", j, err)
		}
	}
	epoch := time.Now().UnixNano()
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	host, port, err := splitHostPort(cfg.BindAddr, -1)
	if err != nil {
		return nil, fmt.Errorf("cannot make cluster member: BindAddr: %w", err)
	}
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, port, port
	if cfg.AdvertiseAddr != "" {
		host, port, err := splitHostPort(cfg.AdvertiseAddr, mc.BindPort)
		if err != nil {
			return nil, fmt.Errorf("cannot make cluster member: AdvertiseAddr: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}
	if cfg.ReadAddr != "" {
		if cfg.ReadAddr, err = reachableReadAddr(cfg.ReadAddr, mc); err != nil {
			return nil, fmt.Errorf("cannot make cluster member: %w", err)
		}
	}
	md := meta{role: cfg.Role, epoch: epoch, readAddr: cfg.ReadAddr}.encode()
	if len(md) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(md), memberlist.MetaMaxSize)
	}

	cfg.Timing.apply(mc)
	if len(cfg.Keys) > 0 {
		if mc.Keyring, err = keyring(cfg.Keys); err != nil {
			return nil, fmt.Errorf("cannot make cluster member: %w", err)
		}
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	log := cfg.Logger.With("component", "cluster", "member", cfg.Name)
	mc.Logger = newMemberlistLogger(log)
	c := &Cluster{
		cfg:     cfg,
		log:     log,
		meta:    md,
		changes: make(chan struct{}, 1),
		members: map[string]Member{},
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if c.metrics, err = newMetrics(cfg.Metrics); err != nil {
		return nil, fmt.Errorf("cannot make cluster member: %w", err)
	}
	mc.Delegate = delegate{c}
	mc.Events = events{c}
	if c.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("cannot make cluster member: %w", err)
	}
	return c, nil
}

// reachableReadAddr is readAddr as other members dial it: a read API
// listening on every interface (0.0.0.0, ::) is announced at the host
// gossip is advertised at, chosen as memberlist chooses it (the advertise
// address, else a specific bind address, else the host's private IP).
func reachableReadAddr(readAddr string, mc *memberlist.Config) (string, error) {
	host, port, err := net.SplitHostPort(readAddr)
	if err != nil {
		return "", fmt.Errorf("ReadAddr: %w", err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return readAddr, nil
	}
	switch ip := net.ParseIP(mc.BindAddr); {
	case mc.AdvertiseAddr != "":
		host = mc.AdvertiseAddr
	case ip != nil && !ip.IsUnspecified():
		host = mc.BindAddr
	default:
		if host, err = sockaddr.GetPrivateIP(); err != nil || host == "" {
			return "", fmt.Errorf("cannot find an address to announce the read API %s at (set the advertise address): %v", readAddr, err)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// defaultName is the hostname and a random suffix.
func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "kgate"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// splitHostPort parses host:port, or a bare host with port def (def < 0:
// the port is required).
func splitHostPort(s string, def int) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		if def < 0 || strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
			return "", 0, err
		}
		return strings.Trim(s, "[]"), def, nil
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, int(port), nil
}

// Run joins the cluster (retrying in the background) and keeps the
// membership until ctx ends, then leaves gracefully and shuts down. It
// returns nil then, or after Close.
func (c *Cluster) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran || c.closed {
		c.mu.Unlock()
		return errors.New("cannot run cluster member: already run or closed")
	}
	c.ran = true
	c.mu.Unlock()
	defer close(c.done)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { c.joinLoop(ctx) })
	c.log.Info("cluster member started", "addr", c.Addr(), "role", c.cfg.Role, "join", c.cfg.Join)
	leave := false
	select {
	case <-ctx.Done():
		leave = true
	case <-c.closing:
	}
	cancel()
	c.stop(leave)
	wg.Wait()
	c.log.Info("cluster member stopped", "left", leave)
	return nil
}

// Close stops gossiping at once, without leaving: the others find out by
// probing, as after a crash. It waits for Run to return. Safe to call more
// than once and after Run returned.
func (c *Cluster) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	ran := c.ran
	c.mu.Unlock()
	if ran {
		if first {
			close(c.closing)
		}
		<-c.done
		return nil
	}
	c.stop(false)
	return nil
}

// stop leaves (when asked) and shuts memberlist down, once.
func (c *Cluster) stop(leave bool) {
	c.stopOnce.Do(func() {
		if leave {
			timeout := max(4*c.cfg.Timing.GossipInterval, 500*time.Millisecond)
			if err := c.ml.Leave(timeout); err != nil {
				c.log.Warn("cannot leave the cluster", "err", err)
			}
		}
		if err := c.ml.Shutdown(); err != nil {
			c.log.Warn("cannot shut down gossip", "err", err)
		}
	})
}

// LocalName is this member's name.
func (c *Cluster) LocalName() string { return c.cfg.Name }

// Addr is this member's advertised gossip address (host:port).
func (c *Cluster) Addr() string { return c.ml.LocalNode().Address() }

// Local describes this member.
func (c *Cluster) Local() Member {
	m, _ := decodeMeta(c.meta)
	return Member{Name: c.cfg.Name, Role: m.role, Addr: c.Addr(), ReadAddr: m.readAddr, Epoch: m.epoch}
}

// Members returns the alive members, this one included, sorted by name.
// A member suspected but not yet declared dead counts as alive.
func (c *Cluster) Members() []Member {
	c.mu.Lock()
	out := make([]Member, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, m)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// CacheNodes returns the alive cache nodes, sorted by name.
func (c *Cluster) CacheNodes() []Member {
	return slices.DeleteFunc(c.Members(), func(m Member) bool { return m.Role != RoleCacheNode })
}

// Changes receives a value after the member list changed (a join, a
// departure, new metadata). Notifications coalesce: read Members after
// each.
func (c *Cluster) Changes() <-chan struct{} { return c.changes }

// update applies a membership event. memberlist calls it synchronously,
// holding its own locks: it must not block nor call into memberlist.
func (c *Cluster) update(n *memberlist.Node, alive bool) {
	m := Member{Name: n.Name, Addr: n.Address()}
	if alive {
		md, err := decodeMeta(n.Meta)
		if err != nil {
			c.log.Debug("member with unreadable metadata", "name", n.Name, "addr", m.Addr, "err", err)
		}
		m.Role, m.ReadAddr, m.Epoch = md.role, md.readAddr, md.epoch
	}
	c.mu.Lock()
	old, had := c.members[n.Name]
	switch {
	case alive && (!had || old != m):
		c.members[n.Name] = m
	case !alive && had:
		delete(c.members, n.Name)
	default:
		c.mu.Unlock()
		return
	}
	c.metrics.set(c.members)
	c.mu.Unlock()
	if !alive {
		m = old
	}
	c.log.Debug("membership changed", "name", m.Name, "alive", alive, "role", m.Role, "addr", m.Addr)
	select {
	case c.changes <- struct{}{}:
	default:
	}
}

// events is the memberlist event delegate. It updates the member map
// directly instead of going through a channel that something would have
// to drain: memberlist stalls while an event delegate blocks.
type events struct{ c *Cluster }

func (e events) NotifyJoin(n *memberlist.Node)   { e.c.update(n, true) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.c.update(n, false) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.c.update(n, true) }

// delegate gives memberlist this member's metadata; kgate sends no user
// messages over gossip.
type delegate struct{ c *Cluster }

func (d delegate) NodeMeta(limit int) []byte {
	if len(d.c.meta) > limit {
		return nil // checked in New; never panic inside memberlist
	}
	return d.c.meta
}
func (delegate) NotifyMsg([]byte)                    {}
func (delegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (delegate) LocalState(bool) []byte              { return nil }
func (delegate) MergeRemoteState(buf []byte, _ bool) {}

// newMemberlistLogger routes memberlist's log lines ("[LEVEL] memberlist:
// text") to l at debug: memberlist is chatty, and its warnings (failed
// probes, refused joins) are routine while members come and go.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{l}, "", 0)
}

type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	if !w.l.Enabled(context.Background(), slog.LevelDebug) {
		return len(p), nil
	}
	s := strings.TrimSpace(string(p))
	level := ""
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i > 0 {
			level, s = s[1:i], strings.TrimSpace(s[i+1:])
		}
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	w.l.Debug(s, "memberlist_level", level)
	return len(p), nil
}
