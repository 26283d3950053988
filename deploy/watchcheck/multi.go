package watchcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/deploy/role"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage/ranges"
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
	// stack holds Truth, Registry, Ranges and Bundle.
	stack
	cfg MultiConfig
	// ConfigMapRanges are the ids of the ranges of ConfigMaps, in key
	// order.
	ConfigMapRanges []string

	mu    sync.Mutex // guards nodes and gws (the slots, not what they run)
	nodes []*nodeSlot
	gws   []*gatewaySlot
}

// slot is one cache node or gateway name, running its role R or not.
type slot[R any] struct {
	name string
	role *R // nil while stopped
	// conn, cancel and done are the last start's: its NATS connection,
	// and how to stop its Run and wait for it (goRun).
	conn   *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// nodeSlot is one cache node name, running or not.
type nodeSlot = slot[role.CacheNode]

// gatewaySlot is one gateway name and address, running or not.
type gatewaySlot struct {
	slot[role.Gateway]
	addr string
	// metrics of every start, the current one last.
	metrics []*prometheus.Registry
}

// StartMulti starts etcd, NATS, the cache nodes and then the gateways, and
// returns once every gateway serves every range and placement is settled.
func StartMulti(ctx context.Context, cfg MultiConfig) (*Multi, error) {
	if err := defaults(cfg.Dir, cfg.Logger, &cfg.BookmarkInterval, &cfg.ProgressInterval, &cfg.Window); err != nil {
		return nil, err
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
	m := &Multi{stack: stack{log: cfg.Logger}, cfg: cfg}
	return startOrClose(ctx, m.log, m, m.start)
}

func (m *Multi) start(ctx context.Context) error {
	if err := m.startStores(ctx, m.cfg.Dir); err != nil {
		return err
	}
	if err := m.openStorage(m.cfg.Splits); err != nil {
		return err
	}
	for _, r := range m.Ranges.Intersecting(m.Resource.ListPrefix("")) {
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
		m.gws = append(m.gws, &gatewaySlot{slot: slot[role.Gateway]{name: fmt.Sprintf("gateway-%d", i)}, addr: addr})
	}
	if err := m.prepareGateways(m.cfg.Dir, m.gws[0].addr); err != nil {
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

// begin checks, under mu, that s is stopped, and returns the gossip
// seeds of the running members and a NATS connection named after s;
// what names s's kind in the error when it runs.
func (s *slot[R]) begin(m *Multi, what string) ([]string, *nats.Conn, error) {
	m.mu.Lock()
	if s.role != nil {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("%s %s is running", what, s.name)
	}
	seeds := m.seeds()
	m.mu.Unlock()
	nc, err := nats.Connect(m.nats.ClientURL(), nats.Name("kgate-"+s.name), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	return seeds, nc, nil
}

// run calls run (r's Run) in a goroutine and, under mu, makes r, with
// its NATS connection nc, what s runs. It returns where Run's error
// arrives.
func (s *slot[R]) run(mu *sync.Mutex, r *R, nc *nats.Conn, run func(context.Context) error) chan error {
	cancel, done := goRun(run)
	mu.Lock()
	defer mu.Unlock()
	s.role, s.conn, s.cancel, s.done = r, nc, cancel, done
	return done
}

// take marks s stopped, under mu, and returns what it was: a nil role
// when it was not running.
func (s *slot[R]) take(mu *sync.Mutex) slot[R] {
	mu.Lock()
	defer mu.Unlock()
	was := *s
	s.role = nil
	return was
}

// stop stops s the way SIGTERM does (its Run context is cancelled) and
// returns once Run has returned; what names s's kind in Run's error.
func (s *slot[R]) stop(mu *sync.Mutex, what string) error {
	was := s.take(mu)
	if was.role == nil {
		return nil
	}
	was.cancel()
	err := <-was.done
	was.conn.Close()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s %s: %w", what, s.name, err)
	}
	return nil
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
	m.mu.Unlock()
	seeds, nc, err := s.begin(m, "cache node")
	if err != nil {
		return err
	}
	log := m.log.With("node", s.name)
	r, err := role.NewCacheNode(role.CacheNodeConfig{
		Node: cachenode.Config{
			Etcd: m.Etcd, NATS: nc, Registry: m.Registry, Codec: m.Codec, Listen: "127.0.0.1:0",
			// The table following the registry, as in production: ranges
			// of custom resources come and go with their CRDs.
			Ranges: m.storage.Ranges,
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
	done := s.run(&m.mu, r, nc, r.Run)
	_, err = waitReady(ctx, "cache node "+s.name, r.Node.Ready, done)
	return err
}

// KillNode stops cache node i as a crash would: its NATS connection drops
// first (no goodbye, nothing more published), its gossip stops without
// leaving (the others find out by probing), then its read API and
// reflectors stop.
func (m *Multi) KillNode(i int) error {
	m.mu.Lock()
	s := m.nodes[i]
	m.mu.Unlock()
	was := s.take(&m.mu)
	if was.role == nil {
		return nil
	}
	was.conn.Close()
	was.role.Members.Close()
	was.role.Node.Close()
	was.cancel()
	<-was.done // errors of a killed node are no news
	return nil
}

// StopNode stops cache node i gracefully: it leaves the gossip cluster
// and announces that it is gone (the SIGTERM path).
func (m *Multi) StopNode(i int) error {
	m.mu.Lock()
	s := m.nodes[i]
	m.mu.Unlock()
	return s.stop(&m.mu, "cache node")
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
	addr := s.addr
	m.mu.Unlock()
	seeds, nc, err := s.begin(m, "gateway")
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	log := m.log.With("gateway", s.name)
	var r *role.Gateway
	for range 50 { // the address may not be free again yet
		r, err = role.NewGateway(role.GatewayConfig{
			Gateway: gateway.Config{
				Listen: addr, TLS: m.tls, Replicas: m.cfg.Replicas,
				Auth:  gateway.AuthConfig{ClientCAFile: m.Bundle.CAFile},
				Build: "watchcheck", BookmarkInterval: m.cfg.BookmarkInterval,
			},
			Deps: gateway.Deps{
				Backend: m.storage, NATS: nc,
				Logger: log.With("component", "gateway"), Metrics: reg, Gatherer: reg,
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
	m.mu.Lock()
	s.metrics = append(s.metrics, reg) // empty until r runs
	m.mu.Unlock()
	done := s.run(&m.mu, r, nc, r.Run)
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
	m.mu.Unlock()
	return s.stop(&m.mu, "gateway")
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
	return m.stack.close(errs)
}
