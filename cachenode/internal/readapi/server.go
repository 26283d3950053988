// Package readapi is a cache node's internal HTTP API: get one object,
// list with selectors and pages, read the events after a revision, and
// readiness. It speaks the private protocol of package wire over plain
// HTTP on an internal address, over mutual TLS when configured;
// cachenode/client is its only client.
package readapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/cachenode/internal/window"
	"github.com/kgate/kgate/cachenode/internal/wire"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/valyala/fasthttp"
)

// Range is what the API reads of one range (a reflector).
type Range interface {
	Range() *ranges.Range
	Ready() bool
	Seen() int64
	WaitFor(ctx context.Context, rev int64) error
	Snapshot() (*store.Snapshot, error)
	At(rev int64) (*store.Snapshot, error)
	Since(rev int64, dst []*window.Item, maxBytes int64) ([]*window.Item, int64, error)
}

// RangeSet is the set of ranges a node serves.
type RangeSet interface {
	Get(id string) (Range, bool)
	All() []Range
}

// Map is a fixed RangeSet, by range id.
type Map map[string]Range

// Get returns the range named id.
func (m Map) Get(id string) (Range, bool) { r, ok := m[id]; return r, ok }

// All returns every range.
func (m Map) All() []Range {
	out := make([]Range, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return out
}

// Config configures the API.
type Config struct {
	// Listen is the address to listen on ("127.0.0.1:0" picks a port).
	Listen string
	// Ranges served; the set may change while the API serves.
	Ranges RangeSet
	// WaitTimeout bounds how long a read waits for a revision before
	// failing with storage.ErrRevisionTooLarge. Default 3s.
	WaitTimeout time.Duration
	// MaxEventBytes bounds an events answer (the client asks again from
	// where it stopped). Default 16 MiB.
	MaxEventBytes int64
	// TLS, when set, serves over TLS with it: the internal plane's
	// configuration requires and checks client certificates. Nil serves
	// plain HTTP.
	TLS *tls.Config
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics; nil records nothing.
	Metrics *Metrics
}

// Server is the read API.
type Server struct {
	cfg Config
	log *slog.Logger
	ln  net.Listener
	srv *fasthttp.Server

	// base is cancelled when the server stops: waits end.
	base   context.Context
	cancel context.CancelFunc

	entries sync.Pool // *[]*store.Entry, list pages
	items   sync.Pool // *[]*window.Item, event answers
	bufs    sync.Pool // *[]byte, scratch
}

// New listens on cfg.Listen; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		return nil, errors.New("cannot make read API: Listen is required")
	}
	if cfg.WaitTimeout < 0 || cfg.MaxEventBytes < 0 {
		return nil, errors.New("cannot make read API: negative setting")
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = 3 * time.Second
	}
	if cfg.MaxEventBytes == 0 {
		cfg.MaxEventBytes = 16 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.Listen, err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ln: ln}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		Name:               "kgate-cachenode",
		ReadTimeout:        30 * time.Second,
		IdleTimeout:        2 * time.Minute,
		MaxRequestBodySize: 64 << 10, // GETs only
		NoDefaultDate:      true,
		// The worker pool cleaner notices Shutdown only when it wakes.
		MaxIdleWorkerDuration:         time.Second,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		Logger:                        fasthttpLogger{cfg.Logger},
	}
	return s, nil
}

// Addr is the address listened on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx is done, then shuts down and returns nil.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		s.cancel()
		return fmt.Errorf("cannot serve read API: %w", err)
	case <-ctx.Done():
	}
	s.cancel()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.ShutdownWithContext(sctx); err != nil {
		s.log.Warn("read API shutdown", "err", err)
	}
	<-errc
	return nil
}

// Close releases the listener of a server that never ran.
func (s *Server) Close() error {
	s.cancel()
	if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cannot close read API listener: %w", err)
	}
	return nil
}

// handle routes, times and counts, and turns errors into statuses: the
// one place that does so.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	var (
		verb string
		err  error
	)
	switch string(ctx.Path()) {
	case wire.PathGet:
		verb, err = "get", s.get(ctx)
	case wire.PathList:
		verb, err = "list", s.list(ctx)
	case wire.PathEvents:
		verb, err = "events", s.events(ctx)
	case wire.PathReady:
		verb, err = "ready", s.ready(ctx)
	default:
		verb = "other"
		err = fmt.Errorf("%w: no such path %q", wire.ErrBadRequest, ctx.Path())
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
	code := fasthttp.StatusOK
	if err != nil {
		kind, status := wire.Kind(err)
		if kind == wire.KindInternal {
			s.log.Error("read API request failed", "path", string(ctx.Path()), "err", err)
		}
		code = status
		ctx.Response.ResetBody() // not Reset: it forgets NoDefaultDate
		ctx.SetStatusCode(status)
		ctx.Response.Header.Set(wire.HeaderError, kind)
		ctx.SetBodyString(err.Error())
	}
	s.cfg.Metrics.observe(verb, code, time.Since(start))
}

// ready answers whether the node serves, synced, every range it has or,
// when the request names ranges, each of those.
func (s *Server) ready(ctx *fasthttp.RequestCtx) error {
	if ids := ctx.QueryArgs().PeekMulti(wire.ArgRange); len(ids) > 0 {
		for _, id := range ids {
			r, ok := s.cfg.Ranges.Get(tmpString(id))
			if !ok {
				return fmt.Errorf("range %q not served here: %w", id, storage.ErrUnavailable)
			}
			if !r.Ready() {
				return fmt.Errorf("range %q not synced: %w", id, storage.ErrUnavailable)
			}
		}
		ctx.SetBodyString("ok")
		return nil
	}
	for _, r := range s.cfg.Ranges.All() {
		if !r.Ready() {
			return fmt.Errorf("range %s not synced: %w", r.Range().ID, storage.ErrUnavailable)
		}
	}
	ctx.SetBodyString("ok")
	return nil
}

// tmpString views b as a string without copying; valid only while the
// request is handled and never kept.
func tmpString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (s *Server) rangeOf(args *fasthttp.Args) (Range, error) {
	id := args.Peek(wire.ArgRange)
	r, ok := s.cfg.Ranges.Get(tmpString(id))
	if !ok {
		return nil, fmt.Errorf("range %q not served here: %w", id, storage.ErrUnavailable)
	}
	if !r.Ready() {
		return nil, fmt.Errorf("range %q not synced: %w", id, storage.ErrUnavailable)
	}
	return r, nil
}

func intArg(args *fasthttp.Args, name string) (int64, error) {
	b := args.Peek(name)
	if len(b) == 0 {
		return 0, nil
	}
	v, err := strconv.ParseInt(tmpString(b), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%w: %s=%q", wire.ErrBadRequest, name, b)
	}
	return v, nil
}

// snapshot returns the state a read asks for: rv 0 is now; Exact rv the
// state at rv; otherwise (NotOlderThan, or no match) now, once rv is seen.
func (s *Server) snapshot(r Range, args *fasthttp.Args) (*store.Snapshot, error) {
	rv, err := intArg(args, wire.ArgRV)
	if err != nil {
		return nil, err
	}
	match := tmpString(args.Peek(wire.ArgMatch))
	switch match {
	case "", wire.MatchNotOlderThan, wire.MatchExact:
	default:
		return nil, fmt.Errorf("%w: match=%q", wire.ErrBadRequest, match)
	}
	if rv == 0 {
		return r.Snapshot()
	}
	if err := s.waitFor(r, rv, args); err != nil {
		return nil, err
	}
	if match == wire.MatchExact {
		return r.At(rv)
	}
	return r.Snapshot()
}

func (s *Server) waitFor(r Range, rv int64, args *fasthttp.Args) error {
	if r.Seen() >= rv {
		return nil
	}
	wait := s.cfg.WaitTimeout
	if ms, err := intArg(args, wire.ArgWait); err == nil && ms > 0 {
		wait = min(wait, time.Duration(ms)*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(s.base, wait)
	defer cancel()
	if err := r.WaitFor(ctx, rv); err != nil {
		if s.base.Err() != nil {
			return fmt.Errorf("cache node stopping: %w", storage.ErrUnavailable)
		}
		return fmt.Errorf("range %s did not reach revision %d in %v (seen %d): %w", r.Range().ID, rv, wait, r.Seen(), storage.ErrRevisionTooLarge)
	}
	return nil
}

// object returns e in the format asked for.
func object(e *store.Entry, protobuf bool) ([]byte, error) {
	if !protobuf {
		return e.JSON, nil
	}
	b, err := e.Protobuf()
	if err != nil {
		return nil, fmt.Errorf("cannot encode %s as protobuf: %w", e.Key, err)
	}
	return b, nil
}

func formatArg(args *fasthttp.Args) (protobuf bool, err error) {
	switch f := tmpString(args.Peek(wire.ArgFormat)); f {
	case "", wire.FormatJSON:
		return false, nil
	case wire.FormatProtobuf:
		return true, nil
	default:
		return false, fmt.Errorf("%w: format=%q", wire.ErrBadRequest, f)
	}
}

func (s *Server) get(ctx *fasthttp.RequestCtx) error {
	args := ctx.QueryArgs()
	r, err := s.rangeOf(args)
	if err != nil {
		return err
	}
	protobuf, err := formatArg(args)
	if err != nil {
		return err
	}
	key := tmpString(args.Peek(wire.ArgKey))
	if !r.Range().Contains(key) {
		return fmt.Errorf("%w: key %q outside range %s", wire.ErrBadRequest, key, r.Range().ID)
	}
	snap, err := s.snapshot(r, args)
	if err != nil {
		return err
	}
	e, ok := snap.Get(key)
	if !ok {
		return fmt.Errorf("%s at revision %d: %w", key, snap.Revision, storage.ErrNotFound)
	}
	data, err := object(e, protobuf)
	if err != nil {
		return err
	}
	bp := s.buf()
	defer s.bufs.Put(bp)
	*bp = wire.AppendUvarint((*bp)[:0], uint64(e.ModRevision))
	ctx.Response.AppendBody(*bp)
	ctx.Response.AppendBody(data)
	return nil
}

func (s *Server) buf() *[]byte {
	if bp, ok := s.bufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 512)
	return &b
}
