package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/storage/storagetest"
)

// member is a running Cluster in a test.
type member struct {
	*Cluster
	cancel context.CancelFunc
	ran    chan error
}

// start makes and runs a member on a free loopback port with Fast timing.
func start(t *testing.T, cfg Config) *member {
	t.Helper()
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Timing = Fast()
	if cfg.Logger == nil && testing.Verbose() && os.Getenv("CLUSTER_DEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{Cluster: c, cancel: cancel, ran: make(chan error, 1)}
	go func() { m.ran <- c.Run(ctx) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop leaves gracefully and waits for Run; a no-op the second time.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	select {
	case err, ok := <-m.ran:
		if !ok {
			return
		}
		if err != nil {
			t.Errorf("%s: Run = %v", m.LocalName(), err)
		}
		close(m.ran)
	case <-time.After(10 * time.Second):
		t.Errorf("%s: Run did not return", m.LocalName())
	}
}

func names(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// sees returns nil when m sees exactly want as members.
func sees(m *member, want ...string) func() error {
	return func() error {
		if got := names(m.Members()); !slices.Equal(got, want) {
			return fmt.Errorf("%s sees %v, want %v", m.LocalName(), got, want)
		}
		return nil
	}
}

// joinFailures is a slog.Handler that signals each failed join attempt
// (nothing to join) on ch, dropping signals nobody waits for.
type joinFailures struct{ ch chan struct{} }

func (h joinFailures) Enabled(context.Context, slog.Level) bool { return true }
func (h joinFailures) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h joinFailures) WithGroup(string) slog.Handler            { return h }
func (h joinFailures) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "nothing to join yet" {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}

func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		storagetest.Eventually(t, 5*time.Second, "goroutines end", func() error {
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<20)
				return fmt.Errorf("%d goroutines left, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
			return nil
		})
	})
}

func TestThreeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("gossips over loopback: skipped under -short")
	}
	checkGoroutines(t)
	reg := prometheus.NewRegistry()
	a := start(t, Config{Name: "a", Role: RoleCacheNode, ReadAddr: "127.0.0.1:8001", Metrics: reg})
	b := start(t, Config{Name: "b", Role: RoleCacheNode, ReadAddr: "127.0.0.1:8002", Join: []string{a.Addr()}})
	g := start(t, Config{Name: "g", Role: RoleGateway, Join: []string{b.Addr()}})

	for _, m := range []*member{a, b, g} {
		storagetest.Eventually(t, 5*time.Second, "membership", sees(m, "a", "b", "g"))
	}
	for _, m := range []*member{a, b, g} {
		got := m.Members()
		want := []Member{a.Local(), b.Local(), g.Local()}
		if !slices.Equal(got, want) {
			t.Errorf("%s: Members = %+v, want %+v", m.LocalName(), got, want)
		}
		if cn := names(m.CacheNodes()); !slices.Equal(cn, []string{"a", "b"}) {
			t.Errorf("%s: CacheNodes = %v", m.LocalName(), cn)
		}
	}
	if l := a.Local(); l.ReadAddr != "127.0.0.1:8001" || l.Role != RoleCacheNode || l.Epoch == 0 || !strings.HasPrefix(l.Addr, "127.0.0.1:") {
		t.Errorf("a.Local = %+v", l)
	}
	if got := gauge(t, reg, "cachenode"); got != 2 {
		t.Errorf("kgate_cluster_members{role=cachenode} = %v, want 2", got)
	}
	drain(a.Changes())

	// b stops gossiping without leaving: the others must find out by
	// probing.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	took := storagetest.Eventually(t, 6*time.Second, "membership", sees(a, "a", "g"))
	storagetest.Eventually(t, time.Second, "membership", sees(g, "a", "g"))
	t.Logf("a dropped b, which stopped without leaving, after %v", took)
	select {
	case <-a.Changes():
	default:
		t.Error("no change notified for b's failure")
	}

	// g leaves gracefully: a learns it from the leave message, faster than
	// by probing.
	g.stop(t)
	took = storagetest.Eventually(t, 3*time.Second, "membership", sees(a, "a"))
	t.Logf("a dropped g, which left, after %v", took)
	if got := gauge(t, reg, "gateway"); got != 0 {
		t.Errorf("kgate_cluster_members{role=gateway} = %v, want 0", got)
	}
}

// gauge reads kgate_cluster_members{role} from reg.
func gauge(t *testing.T, reg *prometheus.Registry, role string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kgate_cluster_members" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "role" && l.GetValue() == role {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no kgate_cluster_members{role=%q}", role)
	return 0
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func TestJoinByDNSName(t *testing.T) {
	if testing.Short() {
		t.Skip("gossips over loopback: skipped under -short")
	}
	checkGoroutines(t)
	a := start(t, Config{Name: "a", Role: RoleGateway})
	_, port, _ := strings.Cut(a.Addr(), ":")

	// An unresolvable name next to a resolvable one: the join goes through
	// the one that resolves.
	b := start(t, Config{Name: "b", Role: RoleGateway, Join: []string{"no-such-host.invalid:" + port, "localhost:" + port}})
	storagetest.Eventually(t, 10*time.Second, "membership", sees(b, "a", "b"))
	storagetest.Eventually(t, 2*time.Second, "membership", sees(a, "a", "b"))

	// Nothing resolves: the member keeps running alone and retrying, and
	// stops promptly.
	failed := joinFailures{ch: make(chan struct{}, 1)}
	c := start(t, Config{Name: "c", Role: RoleGateway, Join: []string{"no-such-host.invalid:" + port}, Logger: slog.New(failed)})
	for range 3 { // the first attempt and two retries after backing off
		select {
		case <-failed.ch:
		case <-time.After(10 * time.Second):
			t.Fatal("c made no further join attempt")
		}
	}
	if got := names(c.Members()); !slices.Equal(got, []string{"c"}) {
		t.Errorf("c sees %v, want itself only", got)
	}
	begin := time.Now()
	c.stop(t)
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("stopping took %v", d)
	}
}

func TestResolveSkipsSelfAndDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("binds a loopback port: skipped under -short")
	}
	c, err := New(Config{Name: "a", Role: RoleGateway, BindAddr: "127.0.0.1:0", Timing: Fast()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, port, _ := strings.Cut(c.Addr(), ":")
	c.cfg.Join = []string{c.Addr(), "localhost:" + port, "127.0.0.1:1", "localhost:1", "127.0.0.1"}
	got := c.resolve(context.Background())
	if !slices.Equal(got, []string{"127.0.0.1:1"}) {
		t.Errorf("resolve = %v, want [127.0.0.1:1]", got)
	}
}

func TestNewRefuses(t *testing.T) {
	f := func(name string, cfg Config, want error) {
		t.Run(name, func(t *testing.T) {
			if cfg.BindAddr == "" {
				cfg.BindAddr = "127.0.0.1:0"
			}
			c, err := New(cfg)
			if err == nil {
				c.Close()
				t.Fatal("New succeeded")
			}
			if want != nil && !errors.Is(err, want) {
				t.Errorf("err = %v, want %v", err, want)
			}
		})
	}
	f("metadata over 512 bytes", Config{Role: RoleCacheNode, ReadAddr: strings.Repeat("h", 600) + ":80"}, ErrMetaTooLarge)
	f("no role", Config{}, nil)
	f("unknown role", Config{Role: "etcd"}, nil)
	f("cache node without read address", Config{Role: RoleCacheNode}, nil)
	f("read address without port", Config{Role: RoleCacheNode, ReadAddr: "localhost"}, nil)
	f("bind address without port", Config{Role: RoleGateway, BindAddr: "127.0.0.1"}, nil)
	f("bad join entry", Config{Role: RoleGateway, Join: []string{":7946"}}, nil)
	f("negative timing", Config{Role: RoleGateway, Timing: Timing{ProbeInterval: -1}}, nil)
}

func TestCloseWithoutRun(t *testing.T) {
	if testing.Short() {
		t.Skip("binds a loopback port: skipped under -short")
	}
	checkGoroutines(t)
	c, err := New(Config{Role: RoleGateway, BindAddr: "127.0.0.1:0", Timing: Fast()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.LocalName(), "") || len(c.Members()) != 1 {
		t.Errorf("Members = %v", c.Members())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err == nil {
		t.Error("Run after Close succeeded")
	}
}
