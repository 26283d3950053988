// Package hijacked tracks requests that run on hijacked connections
// (watch streams, proxied kubelet sessions), which the server's shutdown
// does not wait for, so that their owner can wait for them to end and
// cut those that do not.
package hijacked

import (
	"context"
	"net"
	"sync"
	"time"
)

// Conns are the running requests on hijacked connections. The zero value
// is ready to use.
type Conns struct {
	mu    sync.Mutex // guards n, conns and idle
	n     int        // admitted and not ended
	conns map[net.Conn]struct{}
	idle  chan struct{} // closed when n drops to 0
}

// Admit counts a request whose connection is about to be hijacked.
func (c *Conns) Admit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		c.idle = make(chan struct{})
	}
	c.n++
}

// Attach records the connection of an admitted request.
func (c *Conns) Attach(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[net.Conn]struct{}{}
	}
	c.conns[conn] = struct{}{}
}

// End records that an admitted request ended.
func (c *Conns) End(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, conn)
	c.n--
	if c.n == 0 {
		close(c.idle)
	}
}

// wait reports whether none runs, waiting until none does or ctx ends.
func (c *Conns) wait(ctx context.Context) bool {
	c.mu.Lock()
	n, idle := c.n, c.idle
	c.mu.Unlock()
	if n == 0 {
		return true
	}
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

// Drain waits until every admitted request has ended (their owner has
// told them to end) or ctx ends. Then it closes the connections of those
// still running, so that a write blocked on a client that reads nothing
// fails, and waits at most grace more. It returns how many connections it
// closed and how many requests still run after that.
func (c *Conns) Drain(ctx context.Context, grace time.Duration) (cut, running int) {
	if c.wait(ctx) {
		return 0, 0
	}
	c.mu.Lock()
	for conn := range c.conns {
		_ = conn.Close()
	}
	cut = len(c.conns)
	c.mu.Unlock()
	gctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	c.wait(gctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	return cut, c.n
}
