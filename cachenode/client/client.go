// Package client reads from a cache node: objects, pages of lists and the
// events after a revision, over the node's internal read API. Gateways use
// it. Errors wrap the storage sentinels (storage.ErrNotFound,
// storage.ErrCompacted, storage.ErrRevisionTooLarge,
// storage.ErrUnavailable) or ErrBadRequest.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/internal/wire"
	"github.com/kgate/kgate/storage"
	"github.com/valyala/fasthttp"
)

// ErrBadRequest: the cache node refused the request as malformed, e.g. a
// selector that does not parse or a field it does not support. The error
// message says why.
var ErrBadRequest = wire.ErrBadRequest

// Config configures a client of one cache node.
type Config struct {
	// Addr is the host:port of the node's read API.
	Addr string
	// Timeout bounds each call when the context has no earlier deadline.
	// Default 10s.
	Timeout time.Duration
	// TLS, when set, reaches the node over TLS with it (the internal
	// plane's client configuration presents the gateway's certificate
	// and checks the node's). Nil speaks plain HTTP.
	TLS *tls.Config
}

// Format of the objects returned.
type Format uint8

const (
	// JSON: the object as served in JSON.
	JSON Format = iota
	// Protobuf: the object as a bare protobuf message (no "k8s\x00"
	// magic, no runtime.Unknown envelope).
	Protobuf
)

// Read says which state to read.
type Read struct {
	// ResourceVersion 0 reads whatever the node has now.
	ResourceVersion int64
	// Match: "" or "NotOlderThan" waits until the node has seen
	// ResourceVersion (storage.ErrRevisionTooLarge after the node's wait
	// timeout) and reads then; "Exact" reads the state at exactly
	// ResourceVersion (storage.ErrCompacted when the node cannot).
	Match string
	// Wait, when set, shortens how long the node may wait for
	// ResourceVersion (never past the client's deadline): a millisecond
	// asks "have you seen it already?".
	Wait time.Duration
}

// Object is one object read.
type Object struct {
	// Revision is the object's mod revision (its resourceVersion).
	Revision int64
	// Data is the object in the format asked for.
	Data []byte
}

// ListOptions select a page of a list.
type ListOptions struct {
	Read
	// Prefix of the keys listed; "" lists the whole range.
	Prefix string
	// Label and Field are selectors in their string forms.
	Label, Field string
	// Limit is the page size; 0 is no limit.
	Limit int64
	// Continue is the last key of the previous page; "" starts at the
	// beginning.
	Continue string
	Format   Format
}

// List is one page of a list.
type List struct {
	// Revision the page was read at: use it with Match Exact for the next
	// pages.
	Revision int64
	// Items in key order, in the format asked for.
	Items [][]byte
	// Continue is the last key returned when more items remain, else "".
	Continue string
	// Remaining is the number of items after this page, known only for
	// lists without selectors (else 0), as kube-apiserver's
	// remainingItemCount.
	Remaining int64
}

// Client reads from one cache node. It is safe for concurrent use.
type Client struct {
	addr    string
	tls     bool
	timeout time.Duration
	hc      *fasthttp.HostClient
}

// New returns a client of the node at cfg.Addr.
func New(cfg Config) (*Client, error) {
	if cfg.Addr == "" {
		return nil, errors.New("cannot make cache node client: Addr is required")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("cannot make cache node client: negative Timeout")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Client{
		addr:    cfg.Addr,
		tls:     cfg.TLS != nil,
		timeout: cfg.Timeout,
		hc: &fasthttp.HostClient{
			Addr:     cfg.Addr,
			Name:     "kgate-cachenode-client",
			MaxConns: 1024,
			// Short: fasthttp's idle-connection cleaner outlives Close by
			// up to this long, and leak checks in tests wait for it.
			MaxIdleConnDuration:           2 * time.Second,
			MaxResponseBodySize:           1 << 30,
			ReadBufferSize:                32 << 10,
			DisableHeaderNamesNormalizing: true,
			NoDefaultUserAgentHeader:      true,
			IsTLS:                         cfg.TLS != nil,
			TLSConfig:                     cfg.TLS,
			// A plain dialer: fasthttp's default one caches DNS in a
			// goroutine that lives as long as the process.
			DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
				return net.DialTimeout("tcp", addr, timeout)
			},
		},
	}, nil
}

// Close closes idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// waitMargin is kept between the server's wait and the client's deadline,
// so that the server answers "too large" before the client gives up.
const waitMargin = 200 * time.Millisecond

// do sends req and returns a copy of the body of a 200 answer.
func (c *Client) do(ctx context.Context, req *fasthttp.Request, what string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot %s: %w", what, err)
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	args := req.URI().QueryArgs()
	wait := time.Until(deadline) - waitMargin
	if asked := time.Duration(args.GetUintOrZero(wire.ArgWait)) * time.Millisecond; asked > 0 {
		wait = min(wait, asked)
	}
	if wait > 0 {
		setWait(args, wait)
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	err := c.hc.DoDeadline(req, resp, deadline)
	if errors.Is(err, fasthttp.ErrConnectionClosed) {
		// The node closed a pooled connection before answering: it
		// restarted on its address, and every idle connection to the old
		// process is dead (fasthttp's own retries draw them one by one).
		// Drop them and try once more on a fresh connection.
		c.hc.CloseIdleConnections()
		err = c.hc.DoDeadline(req, resp, deadline)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot %s: cache node %s: %w: %w", what, c.addr, storage.ErrUnavailable, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		kind := string(resp.Header.Peek(wire.HeaderError))
		if sentinel := wire.Sentinel(kind, ErrBadRequest); sentinel != nil {
			return nil, fmt.Errorf("cannot %s: %s: %w", what, resp.Body(), sentinel)
		}
		return nil, fmt.Errorf("cannot %s: cache node %s answered %d: %s", what, c.addr, resp.StatusCode(), resp.Body())
	}
	// A small body is copied exactly and fasthttp's buffer goes back to
	// its pool; a large one is taken as is (fasthttp read it into a fresh
	// buffer of about its size, which its pool would not keep anyway).
	if body := resp.Body(); len(body) <= 64<<10 {
		return append([]byte(nil), body...), nil
	}
	return resp.SwapBody(nil), nil
}

func (c *Client) request(path, rangeID string) *fasthttp.Request {
	req := fasthttp.AcquireRequest()
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetHost(c.addr)
	if c.tls {
		req.URI().SetScheme("https")
	}
	req.URI().SetPath(path)
	if rangeID != "" {
		req.URI().QueryArgs().Add(wire.ArgRange, rangeID)
	}
	return req
}

// setWait asks the node to wait at most d, in whole milliseconds but at
// least one: 0 would mean the node's own, longer, timeout.
func setWait(args *fasthttp.Args, d time.Duration) {
	args.SetUint(wire.ArgWait, max(1, int(d/time.Millisecond)))
}

func setRead(args *fasthttp.Args, r Read, f Format) {
	if r.ResourceVersion != 0 {
		args.Add(wire.ArgRV, strconv.FormatInt(r.ResourceVersion, 10))
	}
	if r.Match != "" {
		args.Add(wire.ArgMatch, r.Match)
	}
	if r.Wait > 0 {
		setWait(args, r.Wait)
	}
	if f == Protobuf {
		args.Add(wire.ArgFormat, wire.FormatProtobuf)
	}
}

// Get reads the object at key of range rangeID.
func (c *Client) Get(ctx context.Context, rangeID, key string, r Read, f Format) (Object, error) {
	req := c.request(wire.PathGet, rangeID)
	defer fasthttp.ReleaseRequest(req)
	args := req.URI().QueryArgs()
	args.Add(wire.ArgKey, key)
	setRead(args, r, f)
	body, err := c.do(ctx, req, "get "+key)
	if err != nil {
		return Object{}, err
	}
	rev, data, err := wire.Uvarint(body)
	if err != nil {
		return Object{}, fmt.Errorf("cannot get %s: %w", key, err)
	}
	return Object{Revision: int64(rev), Data: data}, nil
}

// List reads one page of a list of range rangeID.
func (c *Client) List(ctx context.Context, rangeID string, o ListOptions) (*List, error) {
	req := c.request(wire.PathList, rangeID)
	defer fasthttp.ReleaseRequest(req)
	args := req.URI().QueryArgs()
	if o.Prefix != "" {
		args.Add(wire.ArgPrefix, o.Prefix)
	}
	if o.Label != "" {
		args.Add(wire.ArgLabel, o.Label)
	}
	if o.Field != "" {
		args.Add(wire.ArgField, o.Field)
	}
	if o.Limit > 0 {
		args.Add(wire.ArgLimit, strconv.FormatInt(o.Limit, 10))
	}
	if o.Continue != "" {
		args.Add(wire.ArgContinue, o.Continue)
	}
	setRead(args, o.Read, o.Format)
	body, err := c.do(ctx, req, "list "+rangeID)
	if err != nil {
		return nil, err
	}
	l, err := parseList(body)
	if err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", rangeID, err)
	}
	return l, nil
}

func parseList(b []byte) (*List, error) {
	var (
		l    List
		v, n uint64
		cont []byte
		err  error
		item []byte
		all  = b
	)
	if v, b, err = wire.Uvarint(b); err != nil {
		return nil, err
	}
	l.Revision = int64(v)
	if v, b, err = wire.Uvarint(b); err != nil {
		return nil, err
	}
	l.Remaining = int64(v)
	if cont, b, err = wire.Bytes(b); err != nil {
		return nil, err
	}
	l.Continue = string(cont)
	if n, b, err = wire.Uvarint(b); err != nil {
		return nil, err
	}
	if n > uint64(len(all)) {
		return nil, fmt.Errorf("%w: %d items in %d bytes", wire.ErrMalformed, n, len(all))
	}
	l.Items = make([][]byte, n)
	for i := range l.Items {
		if item, b, err = wire.Bytes(b); err != nil {
			return nil, err
		}
		l.Items[i] = item
	}
	return &l, nil
}

// Events returns the events of range rangeID after revision since, oldest
// first, and the revision seen that the answer is complete up to: there
// is no other event in (since, seen]. A large backlog comes in several
// answers: ask again from seen. The events' Object and PrevObject alias
// one buffer per call. storage.ErrCompacted means the node no longer has
// every event after since.
func (c *Client) Events(ctx context.Context, rangeID string, since int64) ([]event.Event, int64, error) {
	req := c.request(wire.PathEvents, rangeID)
	defer fasthttp.ReleaseRequest(req)
	req.URI().QueryArgs().Add(wire.ArgSince, strconv.FormatInt(since, 10))
	body, err := c.do(ctx, req, "read events of "+rangeID)
	if err != nil {
		return nil, 0, err
	}
	evs, seen, err := parseEvents(body)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read events of %s: %w", rangeID, err)
	}
	return evs, seen, nil
}

func parseEvents(b []byte) ([]event.Event, int64, error) {
	seen, b, err := wire.Uvarint(b)
	if err != nil {
		return nil, 0, err
	}
	n, b, err := wire.Uvarint(b)
	if err != nil {
		return nil, 0, err
	}
	if n > uint64(len(b)) {
		return nil, 0, fmt.Errorf("%w: %d events in %d bytes", wire.ErrMalformed, n, len(b))
	}
	evs := make([]event.Event, n)
	for i := range evs {
		var raw []byte
		if raw, b, err = wire.Bytes(b); err != nil {
			return nil, 0, err
		}
		if err := evs[i].Unmarshal(raw); err != nil {
			return nil, 0, err
		}
	}
	return evs, int64(seen), nil
}

// Ready returns nil when the node serves every range it has or, given
// range IDs, each of those ranges (a range being added to the table is
// not ready on the node until listed).
func (c *Client) Ready(ctx context.Context, rangeIDs ...string) error {
	req := c.request(wire.PathReady, "")
	defer fasthttp.ReleaseRequest(req)
	for _, id := range rangeIDs {
		req.URI().QueryArgs().Add(wire.ArgRange, id)
	}
	_, err := c.do(ctx, req, "check readiness")
	return err
}
