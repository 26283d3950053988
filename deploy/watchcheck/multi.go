package watchcheck

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/cachenode/ranges"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/deploy/role"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/embedded"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/revision"
)

// MultiConfig configures a Multi.
type MultiConfig struct {
	// Dir keeps etcd's data and the certificates. Required.
	Dir string
	// Logger is required.
	Logger *slog.Logger
	// CacheNodes, Gateways and Replicas: default 3, 2 and 2.
	CacheNodes, Gateways, Replicas int
	// Splits split ranges further (ranges.Config); default none.
	Splits ranges.Config
	// BookmarkInterval of watches (default 300ms) and ProgressInterval
	// of the cache nodes (default 200ms).
	BookmarkInterval, ProgressInterval time.Duration
	// Window bounds the cache nodes' windows; zero MaxAge is one hour.
	Window cachenode.WindowConfig
}

// Multi is kgate scaled out in one process: embedded etcd and NATS, cache
// nodes and gateways composed by deploy/role as in production, gossiping
// with each other. Unlike deploy/devcluster, each cache node and gateway
// can be killed, stopped and started again on its own; a gateway comes
// back on the same address.
type Multi struct {
	// Truth reads etcd.
	Truth
	cfg      MultiConfig
	log      *slog.Logger
	etcdSrv  *embedded.Server
	nats     *natsembed.Server
	Registry *registry.Registry
	Ranges   *ranges.Table
	Bundle   *pki.Bundle
	// ConfigMapRanges are the ids of the ranges of ConfigMaps, in key
	// order.
	ConfigMapRanges []string

	store  *storage.Store
	oracle *revision.Oracle
	ips    *ipalloc.Allocator
	tls    *tls.Config

	mu    sync.Mutex // guards nodes and gws (the slots, not what they run)
	nodes []*nodeSlot
	gws   []*gatewaySlot
}

// nodeSlot is one cache node name, running or not.
type nodeSlot struct {
	name   string
	role   *role.CacheNode // nil while stopped
	conn   *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// gatewaySlot is one gateway name and address, running or not.
type gatewaySlot struct {
	name, addr string
	role       *role.Gateway // nil while stopped
	conn       *nats.Conn
	cancel     context.CancelFunc
	done       chan error
	// metrics of every start, the current one last.
	metrics []*prometheus.Registry
}

// StartMulti starts etcd, NATS, the cache nodes and then the gateways, and
// returns once every gateway serves every range and placement is settled.
func StartMulti(ctx context.Context, cfg MultiConfig) (*Multi, error) {
	if cfg.Dir == "" || cfg.Logger == nil {
		return nil, errors.New("cannot start cluster: Dir and Logger are required")
	}
	if cfg.CacheNodes <= 0 {
		cfg.CacheNodes = 3
	}
	if cfg.Gateways <= 0 {
		cfg.Gateways = 2
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 2
	}
	if cfg.BookmarkInterval == 0 {
		cfg.BookmarkInterval = 300 * time.Millisecond
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = 200 * time.Millisecond
	}
	if cfg.Window.MaxAge == 0 {
		cfg.Window.MaxAge = time.Hour
	}
	m := &Multi{cfg: cfg, log: cfg.Logger}
	if err := m.start(ctx); err != nil {
		if cerr := m.Close(); cerr != nil {
			m.log.Warn("cannot stop after a failed start", "err", cerr)
		}
		return nil, err
	}
	return m, nil
}

func (m *Multi) start(ctx context.Context) (err error) {
	log := m.log
	if m.etcdSrv, err = embedded.Start(ctx, embedded.Config{
		Dir: filepath.Join(m.cfg.Dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		ProgressNotifyInterval: 100 * time.Millisecond, UnsafeNoFsync: true, Logger: log.With("component", "etcd"),
	}); err != nil {
		return err
	}
	if m.Etcd, err = clientv3.New(clientv3.Config{Endpoints: m.etcdSrv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
		return fmt.Errorf("cannot connect to etcd: %w", err)
	}
	if m.nats, err = natsembed.Start(natsembed.Config{Logger: log.With("component", "nats")}); err != nil {
		return err
	}
	if m.Registry, err = registry.NewBuiltin(); err != nil {
		return err
	}
	m.Codec = codec.New(m.Registry.Scheme())
	if m.Ranges, err = ranges.WithSplits(m.Registry, m.cfg.Splits); err != nil {
		return err
	}
	res, ok := m.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if !ok {
		return errors.New("cannot find configmaps in the registry")
	}
	m.Resource = res
	for _, r := range m.Ranges.Intersecting(res.ListPrefix("")) {
		m.ConfigMapRanges = append(m.ConfigMapRanges, r.ID)
	}
	for i := range m.cfg.CacheNodes {
		m.nodes = append(m.nodes, &nodeSlot{name: fmt.Sprintf("cachenode-%d", i)})
		if err := m.StartNode(ctx, i); err != nil {
			return err
		}
	}
	for i := range m.cfg.Gateways {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		m.gws = append(m.gws, &gatewaySlot{name: fmt.Sprintf("gateway-%d", i), addr: addr})
	}
	if m.Bundle, err = pki.Ensure(pki.Config{Dir: m.cfg.Dir, ServerURL: "https://" + m.gws[0].addr}); err != nil {
		return err
	}
	if m.tls, err = m.Bundle.ServingTLS(); err != nil {
		return err
	}
	if m.store, err = storage.New(storage.Config{Client: m.Etcd, Registry: m.Registry, Codec: m.Codec, Logger: log.With("component", "storage")}); err != nil {
		return err
	}
	if m.oracle, err = revision.New(revision.Config{KV: m.Etcd, Logger: log.With("component", "revision")}); err != nil {
		return err
	}
	if m.ips, err = ipalloc.New(ipalloc.Config{Client: m.Etcd, Logger: log.With("component", "ipalloc")}); err != nil {
		return err
	}
	for i := range m.gws {
		if err := m.StartGateway(ctx, i); err != nil {
			return err
		}
	}
	return m.WaitSettled(ctx)
}

// seeds are the gossip addresses of the running members.
func (m *Multi) seeds() []string {
	var out []string
	for _, n := range m.nodes {
		if n.role != nil {
			out = append(out, n.role.Members.Addr())
		}
	}
	for _, g := range m.gws {
		if g.role != nil {
			out = append(out, g.role.Members.Addr())
		}
	}
	return out
}

func (m *Multi) connect(name string) (*nats.Conn, error) {
	nc, err := nats.Connect(m.nats.ClientURL(), nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	return nc, nil
}

// Nodes is the number of cache node names (running or not).
func (m *Multi) Nodes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.nodes)
}

// AddNode starts a cache node under a new name and returns its index.
func (m *Multi) AddNode(ctx context.Context) (int, error) {
	m.mu.Lock()
	i := len(m.nodes)
	m.nodes = append(m.nodes, &nodeSlot{name: fmt.Sprintf("cachenode-%d", i)})
	m.mu.Unlock()
	return i, m.StartNode(ctx, i)
}

// StartNode starts cache node i (again, under the same name) and waits
// until it is ready.
func (m *Multi) StartNode(ctx context.Context, i int) error {
	m.mu.Lock()
	s := m.nodes[i]
	if s.role != nil {
		m.mu.Unlock()
		return fmt.Errorf("cache node %s is running", s.name)
	}
	seeds := m.seeds()
	m.mu.Unlock()
	nc, err := m.connect("kgate-" + s.name)
	if err != nil {
		return err
	}
	log := m.log.With("node", s.name)
	r, err := role.NewCacheNode(role.CacheNodeConfig{
		Node: cachenode.Config{
			Etcd: m.Etcd, NATS: nc, Registry: m.Registry, Codec: m.Codec, Ranges: m.Ranges, Listen: "127.0.0.1:0",
			Window: m.cfg.Window, ProgressInterval: m.cfg.ProgressInterval,
			Logger: log.With("component", "cachenode"),
		},
		Membership: role.Membership{Name: s.name, Bind: "127.0.0.1:0", Join: seeds, Timing: cluster.Fast()},
		Replicas:   m.cfg.Replicas,
		Logger:     log,
	})
	if err != nil {
		nc.Close()
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	m.mu.Lock()
	s.role, s.conn, s.cancel, s.done = r, nc, cancel, done
	m.mu.Unlock()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !r.Node.Ready() {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("cache node %s stopped before ready: %w", s.name, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// KillNode stops cache node i as a crash would: its NATS connection drops
// first (no goodbye, nothing more published), its gossip stops without
// leaving (the others find out by probing), then its read API and
// reflectors stop.
func (m *Multi) KillNode(i int) error {
	m.mu.Lock()
	s := m.nodes[i]
	r, nc, cancel, done := s.role, s.conn, s.cancel, s.done
	s.role = nil
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	nc.Close()
	r.Members.Close()
	r.Node.Close()
	cancel()
	<-done // errors of a killed node are no news
	return nil
}

// StopNode stops cache node i gracefully: it leaves the gossip cluster
// and announces that it is gone (the SIGTERM path).
func (m *Multi) StopNode(i int) error {
	m.mu.Lock()
	s := m.nodes[i]
	r, nc, cancel, done := s.role, s.conn, s.cancel, s.done
	s.role = nil
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	cancel()
	err := <-done
	nc.Close()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("cache node %s: %w", s.name, err)
	}
	return nil
}

// Node returns cache node i's role, nil while stopped.
func (m *Multi) Node(i int) *role.CacheNode {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[i].role
}

// StartGateway starts gateway i (again, on its address) and waits until
// it serves every range.
func (m *Multi) StartGateway(ctx context.Context, i int) error {
	m.mu.Lock()
	s := m.gws[i]
	if s.role != nil {
		m.mu.Unlock()
		return fmt.Errorf("gateway %s is running", s.name)
	}
	seeds, addr := m.seeds(), s.addr
	m.mu.Unlock()
	nc, err := m.connect("kgate-" + s.name)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	log := m.log.With("gateway", s.name)
	var r *role.Gateway
	for range 50 { // the address may not be free again yet
		r, err = role.NewGateway(role.GatewayConfig{
			Gateway: gateway.Config{
				Listen: addr, TLS: m.tls,
				Registry: m.Registry, Codec: m.Codec, Ranges: m.Ranges, Store: m.store, Revisions: m.oracle, NATS: nc, ServiceIPs: m.ips,
				Replicas: m.cfg.Replicas, ClientCAFile: m.Bundle.CAFile, Build: "watchcheck",
				BookmarkInterval: m.cfg.BookmarkInterval,
				Logger:           log.With("component", "gateway"), Metrics: reg, Gatherer: reg,
			},
			Membership: role.Membership{Name: s.name, Bind: "127.0.0.1:0", Join: seeds, Timing: cluster.Fast()},
			Logger:     log,
		})
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		nc.Close()
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	m.mu.Lock()
	s.role, s.conn, s.cancel, s.done = r, nc, cancel, done
	s.metrics = append(s.metrics, reg)
	m.mu.Unlock()
	select {
	case <-r.Gateway.Ready():
	case err := <-done:
		m.mu.Lock()
		s.role = nil
		first := len(s.metrics) == 1
		s.metrics = s.metrics[:len(s.metrics)-1]
		m.mu.Unlock()
		nc.Close()
		if first && errors.Is(err, syscall.EADDRINUSE) && ctx.Err() == nil {
			// The free port freeAddr found was taken since: the first
			// start may move elsewhere (a restart may not).
			addr, err := freeAddr()
			if err != nil {
				return err
			}
			m.mu.Lock()
			s.addr = addr
			m.mu.Unlock()
			return m.StartGateway(ctx, i)
		}
		return fmt.Errorf("cannot start gateway %s: %w", s.name, err)
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		err := r.Gateway.Serving(sctx)
		scancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway %s does not serve every range: %w", s.name, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StopGateway stops gateway i the way SIGTERM does (its Run context is
// cancelled): watches end with a final bookmark, requests in flight
// finish. It returns once Run has returned.
func (m *Multi) StopGateway(i int) error {
	m.mu.Lock()
	s := m.gws[i]
	r, nc, cancel, done := s.role, s.conn, s.cancel, s.done
	s.role = nil
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	cancel()
	err := <-done
	nc.Close()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("gateway %s: %w", s.name, err)
	}
	return nil
}

// GatewayAddr is gateway i's HTTPS address, the same across restarts.
func (m *Multi) GatewayAddr(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gws[i].addr
}

// GatewayUp reports whether gateway i runs.
func (m *Multi) GatewayUp(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gws[i].role != nil
}

// Gateway returns gateway i's role, nil while stopped.
func (m *Multi) Gateway(i int) *role.Gateway {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gws[i].role
}

// WaitSettled waits until placement is settled: every range has exactly
// min(Replicas, running nodes) ready replicas, no node still serves a range
// it handed over, and every running gateway knows each range's replicas.
func (m *Multi) WaitSettled(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		why := m.unsettled()
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("placement not settled: %s", why)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (m *Multi) unsettled() string {
	m.mu.Lock()
	var nodes []*role.CacheNode
	for _, n := range m.nodes {
		if n.role != nil {
			nodes = append(nodes, n.role)
		}
	}
	var gws []*role.Gateway
	for _, g := range m.gws {
		if g.role != nil {
			gws = append(gws, g.role)
		}
	}
	m.mu.Unlock()
	want := min(m.cfg.Replicas, len(nodes))
	ready := map[string]int{}
	for _, n := range nodes {
		for _, st := range n.Node.Status() {
			if st.Ready {
				ready[st.ID]++
			}
		}
	}
	for _, r := range m.Ranges.All() {
		if got := ready[r.ID]; got != want {
			return fmt.Sprintf("range %s has %d ready replicas, want %d", r.ID, got, want)
		}
		for _, g := range gws {
			if got := len(g.Directory().Ready(r.ID)); got != want {
				return fmt.Sprintf("gateway %s knows %d ready replicas of %s, want %d", g.Members.LocalName(), got, r.ID, want)
			}
		}
	}
	return ""
}

// Owners returns the names of the running cache nodes serving rangeID.
func (m *Multi) Owners(rangeID string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, n := range m.nodes {
		if n.role == nil {
			continue
		}
		for _, st := range n.role.Node.Status() {
			if st.ID == rangeID && st.Ready {
				out = append(out, n.name)
			}
		}
	}
	return out
}

// Primary returns the index of the running node that publishes rangeID
// (0 when none does).
func (m *Multi) Primary(rangeID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, n := range m.nodes {
		if n.role == nil {
			continue
		}
		for _, st := range n.role.Node.Status() {
			if st.ID == rangeID && st.Primary {
				return i
			}
		}
	}
	return 0
}

// RESTConfig returns a client config for the admin user that reaches the
// API at host (a gateway or a proxy in front of gateways).
func (m *Multi) RESTConfig(host, userAgent string, protobuf bool) (*rest.Config, error) {
	return restConfig(m.Bundle.KubeconfigFile, host, userAgent, protobuf)
}

// Counter sums the series of the counter (or gauge) name of gateway i,
// over all its starts, whose labels include every pair of match.
func (m *Multi) Counter(i int, name string, match map[string]string) float64 {
	m.mu.Lock()
	regs := append([]*prometheus.Registry(nil), m.gws[i].metrics...)
	m.mu.Unlock()
	var sum float64
	for _, reg := range regs {
		sum += sumMetric(reg, name, match)
	}
	return sum
}

// sumMetric sums the series of the counter or gauge name in reg whose
// labels include every pair of match.
func sumMetric(reg prometheus.Gatherer, name string, match map[string]string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if !labelsMatch(mt.GetLabel(), match) {
				continue
			}
			switch {
			case mt.GetCounter() != nil:
				sum += mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				sum += mt.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func labelsMatch(ls []*dto.LabelPair, match map[string]string) bool {
	n := 0
	for _, l := range ls {
		if v, ok := match[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(match)
}

// String describes who runs.
func (m *Multi) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for _, n := range m.nodes {
		parts = append(parts, fmt.Sprintf("%s up=%v", n.name, n.role != nil))
	}
	for _, g := range m.gws {
		parts = append(parts, fmt.Sprintf("%s up=%v", g.name, g.role != nil))
	}
	return strings.Join(parts, ", ")
}

// Close stops every gateway, then every cache node, NATS and etcd.
func (m *Multi) Close() error {
	var errs []error
	for i := range m.gws {
		if err := m.StopGateway(i); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range m.nodes {
		if err := m.StopNode(i); err != nil {
			errs = append(errs, err)
		}
	}
	if m.oracle != nil {
		m.oracle.Close()
	}
	if m.nats != nil {
		if err := m.nats.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.Etcd != nil {
		m.Etcd.Close()
	}
	if m.etcdSrv != nil {
		if err := m.etcdSrv.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
