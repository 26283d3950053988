// Package embedded runs an etcd server inside the process, for `kgate dev`
// and for tests. It is a single-member cluster listening on loopback
// addresses, with its data kept in a directory across restarts.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// Defaults of Config.
const (
	DefaultClientAddr             = "127.0.0.1:2379"
	DefaultPeerAddr               = "127.0.0.1:0"
	DefaultProgressNotifyInterval = time.Second
)

// ErrInvalidConfig is returned by Start for a Config it cannot use.
var ErrInvalidConfig = errors.New("embedded: invalid config")

// Config configures an embedded etcd server.
type Config struct {
	// Dir is the data directory; required. It is created when missing
	// and reused on the next Start.
	Dir string
	// ClientAddr is the host:port clients connect to. Port 0 picks a free
	// port (see Server.Endpoints). Default DefaultClientAddr.
	ClientAddr string
	// PeerAddr is the host:port of the raft peer listener, unused by a
	// single member but required by etcd. Port 0 picks a free port.
	// Default DefaultPeerAddr.
	PeerAddr string
	// ProgressNotifyInterval is how often idle watches with progress
	// notification get one. Default DefaultProgressNotifyInterval.
	ProgressNotifyInterval time.Duration
	// CompactionRetention, when positive, makes etcd compact the history
	// older than this periodically. Zero keeps all history.
	CompactionRetention time.Duration
	// UnsafeNoFsync skips fsync on writes: fast, and loses data on a
	// machine crash. For tests.
	UnsafeNoFsync bool
	// SnapshotCount is how many writes etcd's raft log keeps in memory
	// before a snapshot lets it drop them. Default
	// DefaultSnapshotCount: a single member has no follower to catch up,
	// and etcd's own default (100,000 entries, half a gigabyte of 5 KB
	// objects) is the largest share of an all-in-one kgate's memory.
	SnapshotCount uint64
	// Logger receives etcd's warnings and errors. Default: discard.
	Logger *slog.Logger
	// ClientTLS, when set, serves clients over TLS (https:// endpoints);
	// with its TrustedCAFile clients must present a certificate it
	// verifies, as etcd's --client-cert-auth.
	ClientTLS *ClientTLS
}

// ClientTLS is the client side's TLS: the server's certificate and key and
// the CA of the client certificates (empty: none asked for).
type ClientTLS struct {
	CertFile, KeyFile, TrustedCAFile string
}

// DefaultSnapshotCount is Config.SnapshotCount's default.
const DefaultSnapshotCount = 10_000

func (c *Config) setDefaults() error {
	if c.SnapshotCount == 0 {
		c.SnapshotCount = DefaultSnapshotCount
	}
	if c.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	}
	if c.ClientAddr == "" {
		c.ClientAddr = DefaultClientAddr
	}
	if c.PeerAddr == "" {
		c.PeerAddr = DefaultPeerAddr
	}
	if c.ProgressNotifyInterval == 0 {
		c.ProgressNotifyInterval = DefaultProgressNotifyInterval
	}
	if c.ProgressNotifyInterval < 0 || c.CompactionRetention < 0 {
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	for _, a := range []string{c.ClientAddr, c.PeerAddr} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: address %q: %w", ErrInvalidConfig, a, err)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server is a running embedded etcd.
type Server struct {
	etcd      *embed.Etcd
	endpoints []string
	logger    *slog.Logger

	closing   *atomic.Bool // set when Close starts; quiets etcd's shutdown errors
	closeOnce sync.Once
	drained   chan struct{} // closed when the goroutine draining etcd's errors ends
}

// maxStartAttempts bounds the retries when a port picked as free was taken
// by someone else before etcd bound it.
const maxStartAttempts = 3

// Start starts etcd and waits until it serves clients or ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create etcd data directory: %w", err)
	}
	closing := new(atomic.Bool)
	var lastErr error
	for attempt := 0; attempt < maxStartAttempts; attempt++ {
		e, picked, err := startOnce(cfg, closing)
		if err == nil {
			return wait(ctx, e, cfg.Logger, closing)
		}
		lastErr = err
		if !picked || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		cfg.Logger.Warn("port picked for embedded etcd was taken, retrying", "error", err)
	}
	return nil, fmt.Errorf("cannot start embedded etcd: %w", lastErr)
}

// startOnce starts etcd once; picked reports whether a free port was picked
// for an address with port 0.
func startOnce(cfg Config, closing *atomic.Bool) (e *embed.Etcd, picked bool, err error) {
	clientAddr, pc, err := resolvePort(cfg.ClientAddr)
	if err != nil {
		return nil, false, err
	}
	peerAddr, pp, err := resolvePort(cfg.PeerAddr)
	if err != nil {
		return nil, false, err
	}
	picked = pc || pp
	ec := embed.NewConfig()
	clientURL := url.URL{Scheme: "http", Host: clientAddr}
	if t := cfg.ClientTLS; t != nil {
		clientURL.Scheme = "https"
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.TrustedCAFile != "",
		}
	}
	peerURL := url.URL{Scheme: "http", Host: peerAddr}

	ec.Name = "kgate"
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = []url.URL{peerURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.WatchProgressNotifyInterval = cfg.ProgressNotifyInterval
	ec.EnableGRPCGateway = false
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.SnapshotCount = cfg.SnapshotCount
	ec.SnapshotCatchUpEntries = min(ec.SnapshotCatchUpEntries, cfg.SnapshotCount)
	if cfg.CompactionRetention > 0 {
		ec.AutoCompactionMode = embed.CompactorModePeriodic
		ec.AutoCompactionRetention = cfg.CompactionRetention.String()
	}
	ec.LogLevel = "warn"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(cfg.Logger.With("component", "etcd"), zapcore.WarnLevel, closing))
	e, err = embed.StartEtcd(ec)
	return e, picked, err
}

// resolvePort replaces port 0 in addr by a port free right now.
func resolvePort(addr string) (string, bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("cannot parse address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, false, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", false, fmt.Errorf("cannot find a free port on %s: %w", host, err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return "", false, fmt.Errorf("cannot release port %d: %w", p, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), true, nil
}

func wait(ctx context.Context, e *embed.Etcd, logger *slog.Logger, closing *atomic.Bool) (*Server, error) {
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("cannot start embedded etcd: %w", err)
	case <-ctx.Done():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("cannot start embedded etcd: %w", ctx.Err())
	}
	s := &Server{etcd: e, logger: logger, closing: closing, drained: make(chan struct{})}
	scheme := "http://"
	if !e.Config().ClientTLSInfo.Empty() {
		scheme = "https://"
	}
	for _, l := range e.Clients {
		s.endpoints = append(s.endpoints, scheme+l.Addr().String())
	}
	go s.drainErrors()
	logger.Info("embedded etcd started", "endpoints", s.endpoints, "dir", e.Config().Dir)
	return s, nil
}

// drainErrors logs the serving errors etcd reports until it closes the
// channel, at the end of Close.
func (s *Server) drainErrors() {
	defer close(s.drained)
	for err := range s.etcd.Err() {
		if err != nil && !s.closing.Load() {
			s.logger.Error("embedded etcd failed", "error", err)
		}
	}
}

// Endpoints returns the client URLs, such as "http://127.0.0.1:2379".
func (s *Server) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// Close stops etcd and waits for it. Clients should be closed first: open
// watches delay the shutdown. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.etcd.Close()
		<-s.drained
	})
	return nil
}
