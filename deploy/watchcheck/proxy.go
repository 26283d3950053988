package watchcheck

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is an L4 load balancer in front of gateways, as a Service is: it
// listens on loopback and forwards each new connection to the first
// backend Pick names that accepts it (TLS passes through). Connections
// already made stay with their backend until one side closes them, or
// until Cut breaks them as a crashed backend would.
type Proxy struct {
	ln   net.Listener
	pick func() []string // backends to try, in order

	mu     sync.Mutex // guards conns, closed and per
	conns  map[net.Conn]string
	per    map[string]int // connections made, by backend
	closed bool
	wg     sync.WaitGroup // accept loop and pipes
}

// NewProxy listens on a free loopback port; pick returns the backends to
// try for a new connection, best first.
func NewProxy(pick func() []string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, pick: pick, conns: map[net.Conn]string{}, per: map[string]int{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c net.Conn) {
	var (
		b       net.Conn
		backend string
	)
	for _, addr := range p.pick() {
		var err error
		if b, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			backend = addr
			break
		}
	}
	if b == nil {
		c.Close()
		return
	}
	if !p.track(backend, c, b) {
		c.Close()
		b.Close()
		return
	}
	defer p.untrack(c, b)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close so that the other direction can finish.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
	c.Close()
	b.Close()
}

func (p *Proxy) track(backend string, c, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c], p.conns[b] = backend, backend
	p.per[backend]++
	return true
}

func (p *Proxy) untrack(c, b net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	delete(p.conns, b)
}

// Cut resets every connection to backend, as its crash would, and
// returns how many client connections it broke.
func (p *Proxy) Cut(backend string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c, be := range p.conns {
		if be != backend {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
		n++
	}
	return n / 2
}

// Connections returns the connections made to each backend so far.
func (p *Proxy) Connections() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.per))
	for k, v := range p.per {
		out[k] = v
	}
	return out
}

// Close stops accepting, breaks every connection and waits.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
