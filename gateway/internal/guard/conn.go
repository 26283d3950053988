package guard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// TrackConns wraps a listener's connections so that the end of a
// hijacked one (a watch) can be seen: fasthttp closes it when the stream
// is done.
func TrackConns(ln net.Listener) net.Listener { return trackListener{ln} }

type trackListener struct{ net.Listener }

func (l trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c}, nil
}

type trackedConn struct {
	net.Conn
	mu       sync.Mutex // guards hooks, closed and pending
	hooks    []func()
	closed   bool
	pending  []byte      // read by watchPeer, not yet by the server
	buffered atomic.Bool // len(pending) > 0
}

// Read returns what watchPeer read ahead first.
func (c *trackedConn) Read(p []byte) (int, error) {
	if c.buffered.Load() {
		c.mu.Lock()
		if len(c.pending) > 0 {
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			c.buffered.Store(len(c.pending) > 0)
			c.mu.Unlock()
			return n, nil
		}
		c.mu.Unlock()
	}
	return c.Conn.Read(p)
}

// maxReadAhead bounds what watchPeer keeps for the server to read.
const maxReadAhead = 64 << 10

// watchPeer reads the connection in the background while the server is
// not reading it (a handler is running), to see the client close it: on
// EOF or a read error, gone is called. What it reads meanwhile (a TLS
// close_notify, a pipelined request) is kept for the server's next Read.
// stop ends the watch and returns once it has ended; the connection then
// has no read deadline (the server sets its own before each request).
func (c *trackedConn) watchPeer(gone func(error)) (stop func()) {
	var stopping atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf [4096]byte
		for {
			n, err := c.Conn.Read(buf[:])
			if n > 0 {
				c.mu.Lock()
				c.pending = append(c.pending, buf[:n]...)
				c.buffered.Store(true)
				full := len(c.pending) >= maxReadAhead
				c.mu.Unlock()
				if full {
					return
				}
			}
			if err != nil {
				if !stopping.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
					gone(err)
				}
				return
			}
		}
	}()
	return func() {
		stopping.Store(true)
		_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

func (c *trackedConn) Close() error {
	c.mu.Lock()
	hooks, first := c.hooks, !c.closed
	c.hooks, c.closed = nil, true
	c.mu.Unlock()
	err := c.Conn.Close()
	if first {
		for _, f := range hooks {
			f()
		}
	}
	return err
}

// onClose runs f when conn (or the connection under its TLS) closes; it
// reports false when conn is not tracked.
func onClose(conn net.Conn, f func()) bool {
	t := tracked(conn)
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		go f()
		return true
	}
	t.hooks = append(t.hooks, f)
	return true
}

// tracked is conn, or the connection under its TLS, when tracked; nil
// otherwise.
func tracked(conn net.Conn) *trackedConn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	t, _ := conn.(*trackedConn)
	return t
}

// errClientGone ends the wait of a request whose client closed its
// connection.
var errClientGone = errors.New("client closed the connection")

// waitContext is the context a request waits in for seats (fasthttp's
// RequestCtx ends only at shutdown): it ends when the gateway starts
// shutting down (base), at deadline, or, while watch is on, when the
// client closes conn. It is made only once something asks for it, so
// that requests refused before cost nothing, and the connection is
// watched (a goroutine reading ahead) only while the request is queued;
// stop ends both before the handler goes on.
type waitContext struct {
	base     context.Context
	conn     net.Conn
	deadline time.Time // zero: none but base's
	once     sync.Once
	ctx      context.Context // set by once, like cancel and release
	cancel   context.CancelCauseFunc
	release  context.CancelFunc // of the deadline; nil without one

	mu     sync.Mutex // guards stopFn
	stopFn func()     // nil: conn not watched
}

func (w *waitContext) init() {
	w.once.Do(func() {
		w.ctx, w.cancel = context.WithCancelCause(w.base)
		if !w.deadline.IsZero() {
			w.ctx, w.release = context.WithDeadline(w.ctx, w.deadline)
		}
	})
}

func (w *waitContext) Deadline() (time.Time, bool) { w.init(); return w.ctx.Deadline() }
func (w *waitContext) Done() <-chan struct{}       { w.init(); return w.ctx.Done() }
func (w *waitContext) Err() error                  { w.init(); return w.ctx.Err() }
func (w *waitContext) Value(key any) any           { w.init(); return w.ctx.Value(key) }

// watch starts watching the connection: the context ends if the client
// goes away. It must not block: API Priority and Fairness calls it as
// it queues the request, under its lock.
func (w *waitContext) watch() {
	w.init()
	t := tracked(w.conn)
	if t == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopFn == nil {
		w.stopFn = t.watchPeer(func(err error) { w.cancel(fmt.Errorf("%w: %v", errClientGone, err)) })
	}
}

// stop ends the connection watch, if any, and the context.
func (w *waitContext) stop() {
	w.once.Do(func() {})
	w.mu.Lock()
	stop := w.stopFn
	w.stopFn = nil
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	if w.cancel != nil {
		w.cancel(context.Canceled)
	}
	if w.release != nil {
		w.release()
	}
}
