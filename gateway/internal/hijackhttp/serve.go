// Package hijackhttp serves a request of the fasthttp server with a
// net/http handler on its hijacked connection, as upstream's proxies
// (kube-aggregator's, the kubelet and service proxies) need: their
// ResponseWriter flushes, and upgrades hijack. The request is replayed
// from its sanitized bytes, without the client's credentials.
package hijackhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/gateway/internal/hijacked"
	"github.com/kgate/kgate/gateway/internal/proxyheader"
)

// HeaderAuditID is the response header the gateway set before routing;
// the hijacked response carries it too.
const HeaderAuditID = "Audit-Id"

// linger bounds how long a finished handler's connection may take to
// flush and close before it is closed.
const linger = 5 * time.Second

// Server serves requests on hijacked connections and tracks them until
// they end.
type Server struct {
	// Base is the gateway's lifetime: sessions end when it is cancelled.
	Base context.Context
	Log  *slog.Logger
	// MaxSession bounds one request or upgraded session; zero:
	// unbounded.
	MaxSession time.Duration
	// Sessions are the running requests; other hijacking paths of the
	// owner (a streamed log) count here too, so Wait drains them all.
	Sessions hijacked.Conns
}

// Serve hijacks the connection and serves the request on it with h,
// a net/http handler, through a net/http server reading the request
// again from its sanitized bytes: upstream's proxies need net/http's
// ResponseWriter, Flusher and Hijacker. The session holds no in-flight
// seat once hijacked (guard frees it) and ends on shutdown; what names
// it in the log. The handler's request context derives from Base.
func (p *Server) Serve(rc *fasthttp.RequestCtx, what string, h http.Handler) {
	head := RequestBytes(rc)
	auditID := string(rc.Response.Header.Peek(HeaderAuditID))
	rc.HijackSetNoResponse(true)
	// Counted now, while fasthttp's Shutdown still waits for this
	// handler: it does not wait for the hijacked connection.
	p.Sessions.Admit()
	rc.Hijack(func(c net.Conn) {
		wc := newReplayConn(c, head)
		p.Sessions.Attach(wc)
		defer p.Sessions.End(wc)
		p.serveConn(wc, auditID, what, h)
	})
}

func (p *Server) serveConn(wc *replayConn, auditID, what string, h http.Handler) {
	ctx, cancel := context.WithCancel(p.Base)
	defer cancel()
	if p.MaxSession > 0 {
		ctx, cancel = context.WithTimeout(ctx, p.MaxSession)
		defer cancel()
	}
	var started atomic.Bool
	done := make(chan struct{})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			started.Store(true)
			defer close(done)
			if auditID != "" {
				w.Header().Set(HeaderAuditID, auditID)
			}
			h.ServeHTTP(w, r)
		}),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.Log.Handler(), slog.LevelDebug),
	}
	srv.SetKeepAlivesEnabled(false)
	l := &oneConn{c: wc, closed: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t0 := time.Now()
	select {
	case <-wc.closed: // the server or the handler is done with it
	case <-done:
		// A handler that did not hijack: the server flushes and closes.
		t := time.NewTimer(linger)
		select {
		case <-wc.closed:
		case <-t.C:
		}
		t.Stop()
	case <-ctx.Done(): // shutdown or MaxSession
	}
	wc.detach() // ends a handler still copying
	if started.Load() {
		<-done
	}
	_ = srv.Close()
	<-served
	p.Log.Debug("proxied", "what", what, "took", time.Since(t0))
}

// RequestBytes is the request as the backend handlers read it: its
// method, URI and headers without the client's credentials (proxyheader.Forwardable)
// and its body, already read by fasthttp, with its length.
func RequestBytes(rc *fasthttp.RequestCtx) []byte {
	var b bytes.Buffer
	b.Write(rc.Method())
	b.WriteByte(' ')
	b.Write(rc.RequestURI())
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.Write(rc.Host())
	b.WriteString("\r\n")
	for k, v := range rc.Request.Header.All() {
		name := string(k)
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Transfer-Encoding":
			continue
		}
		if !proxyheader.Forwardable(name) || !proxyheader.Safe(k) || !proxyheader.Safe(v) {
			continue
		}
		b.WriteString(name)
		b.WriteString(": ")
		b.Write(v)
		b.WriteString("\r\n")
	}
	body := rc.Request.Body()
	if len(body) > 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// replayConn is the hijacked connection as the net/http server and the
// proxies see it: it reads the replayed request first, then the
// connection. fasthttp's hijacked connection cannot be closed by its
// holder (Close is a no-op) and is recycled once the hijack handler
// returns, while upstream's copy goroutines may still hold it: Close
// closes the connection underneath (raw), and detach, before the handler
// returns, makes every later Read and Write fail without touching it.
type replayConn struct {
	net.Conn           // fasthttp's: reads through its buffer
	raw      net.Conn  // underneath
	r        io.Reader // replayed request, then Conn
	mu       sync.RWMutex
	detached bool // guarded by mu; Read and Write hold mu.RLock while they use Conn
	once     sync.Once
	closed   chan struct{}
}

func newReplayConn(c net.Conn, head []byte) *replayConn {
	return &replayConn{Conn: c, raw: RawConn(c), r: io.MultiReader(bytes.NewReader(head), c), closed: make(chan struct{})}
}

// RawConn is the connection under fasthttp's hijacked one, which its
// holder cannot close.
func RawConn(c net.Conn) net.Conn {
	if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
		return u.UnsafeConn()
	}
	return c
}

func (c *replayConn) Read(p []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.detached {
		return 0, net.ErrClosed
	}
	return c.r.Read(p)
}

func (c *replayConn) Write(p []byte) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.detached {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// Close closes the connection; it tells closed.
func (c *replayConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.raw.Close()
}

// detach closes the connection, waits for the Reads and Writes it
// unblocks, and fails every later one.
func (c *replayConn) detach() {
	_ = c.Close()
	c.mu.Lock()
	c.detached = true
	c.mu.Unlock()
}

func (c *replayConn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *replayConn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *replayConn) SetDeadline(t time.Time) error      { return c.raw.SetDeadline(t) }
func (c *replayConn) SetReadDeadline(t time.Time) error  { return c.raw.SetReadDeadline(t) }
func (c *replayConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// oneConn is a listener that accepts one connection, then blocks until
// closed.
type oneConn struct {
	mu     sync.Mutex // guards c and done
	c      net.Conn
	done   bool
	closed chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done = true
		close(l.closed)
	}
	return nil
}

func (l *oneConn) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "hijackhttp" }

// Wait waits until every proxied session has ended, after the base
// context was cancelled (which ends them). When ctx ends first it closes
// their connections and waits a little longer; it returns an error when
// some still run then.
func (p *Server) Wait(ctx context.Context) error {
	cut, running := p.Sessions.Drain(ctx, time.Second)
	if running > 0 {
		return fmt.Errorf("cannot end proxied sessions: %d still run", running)
	}
	if cut > 0 {
		p.Log.Warn("proxied sessions cut at shutdown", "sessions", cut)
	}
	return nil
}
