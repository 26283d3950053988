package dockercluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// RoundRobin is a client-side load balancer over the gateways: each new
// connection goes to the gateway after the one the last connection went
// to, and a connection that no gateway process accepted is tried on the
// next one.
//
// That is what a load balancer draining a backend gives its clients: an
// L4 balancer (a Service, a cloud load balancer) picks a backend per
// connection, and a backend that refuses the TCP handshake is one it
// tries the next backend for — no byte of the request left the client,
// so nothing can have been applied twice. Every other failure (a reset
// or EOF once the TLS handshake is done, an error status, a stream ended
// without a final bookmark) reaches the client as it would through a
// real load balancer, so the tests count it as a failed request.
// Connections are not kept alive (Config), so every request is balanced
// afresh, as a balancer balances connections: a kept-alive connection
// would pin a client to a gateway that is shutting down.
//
// "Refused" has two forms here. Without a container behind a published
// port the host refuses the connection (ECONNREFUSED). With a container
// whose gateway does not listen (starting, or stopped listening and
// draining), Docker's port proxy accepts the connection, fails to reach
// the gateway and closes it: the client sees its TLS handshake end
// (EOF or reset) before the server sent a single byte. Both mean no
// gateway process took the connection; both are tried on the next one.
type RoundRobin struct {
	addrs  []string
	dialer net.Dialer
	// Refused counts connections refused (and tried elsewhere);
	// ProxyRefused those Docker's port proxy closed before any byte.
	Refused, ProxyRefused atomic.Int64

	mu   sync.Mutex // guards next
	next int
}

// NewRoundRobin balances over addrs (host:port).
func NewRoundRobin(addrs []string) (*RoundRobin, error) {
	if len(addrs) == 0 {
		return nil, errors.New("cannot balance: no address")
	}
	return &RoundRobin{addrs: addrs, dialer: net.Dialer{Timeout: 10 * time.Second}}, nil
}

// DialTLS connects to the next gateway that accepts and completes a TLS
// handshake with cfg; the address asked for names the server for TLS
// verification only.
func (r *RoundRobin) DialTLS(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("cannot dial %s: %w", addr, err)
	}
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	r.mu.Lock()
	start := r.next
	r.mu.Unlock()
	var errs []error
	for k := range r.addrs {
		i := (start + k) % len(r.addrs)
		conn, err := r.dial(ctx, network, r.addrs[i], cfg)
		if err == nil {
			r.mu.Lock()
			r.next = (i + 1) % len(r.addrs)
			r.mu.Unlock()
			return conn, nil
		}
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			r.Refused.Add(1)
		case errors.Is(err, errProxyRefused):
			r.ProxyRefused.Add(1)
		default:
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("every gateway refused the connection: %w", errors.Join(errs...))
}

var errProxyRefused = errors.New("connection closed before the server sent anything")

// dial connects to addr and completes a TLS handshake; a handshake ended
// by EOF or a reset before any byte came from the server is
// errProxyRefused.
func (r *RoundRobin) dial(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
	raw, err := r.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	counted := &countingConn{Conn: raw}
	conn := tls.Client(counted, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		if counted.read.Load() == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			return nil, fmt.Errorf("%s: %w: %w", addr, errProxyRefused, err)
		}
		return nil, fmt.Errorf("cannot complete the TLS handshake with %s: %w", addr, err)
	}
	return conn, nil
}

// countingConn counts the bytes read.
type countingConn struct {
	net.Conn
	read atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// Config returns base (whose host names the server for TLS verification)
// with its connections made by r and never kept alive.
func (r *RoundRobin) Config(base *rest.Config) (*rest.Config, error) {
	cfg := rest.CopyConfig(base)
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot make TLS configuration: %w", err)
	}
	if tlsCfg == nil {
		return nil, errors.New("cannot balance: the configuration has no TLS")
	}
	cfg.Transport = &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return r.DialTLS(ctx, network, addr, tlsCfg)
		},
		DisableKeepAlives: true,
	}
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	return cfg, nil
}
