package readapi

import (
	"fmt"
	"github.com/kgate/kgate/storage/ranges"

	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/cachenode/internal/window"
	"github.com/kgate/kgate/cachenode/internal/wire"
	"github.com/kgate/kgate/storage/registry"
	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// maxLimit bounds a page.
const maxLimit = 100_000

func (s *Server) list(ctx *fasthttp.RequestCtx) error {
	args := ctx.QueryArgs()
	r, err := s.rangeOf(args)
	if err != nil {
		return err
	}
	protobuf, err := formatArg(args)
	if err != nil {
		return err
	}
	limit, err := intArg(args, wire.ArgLimit)
	if err != nil {
		return err
	}
	o := store.ListOptions{
		Prefix: tmpString(args.Peek(wire.ArgPrefix)),
		After:  tmpString(args.Peek(wire.ArgContinue)),
		Limit:  int(min(limit, maxLimit)),
	}
	rng := r.Range()
	if o.Prefix == "" {
		o.Prefix = rng.Start
	}
	if !prefixMeets(o.Prefix, rng) {
		return fmt.Errorf("%w: prefix %q outside range %s", wire.ErrBadRequest, o.Prefix, rng.ID)
	}
	if l := args.Peek(wire.ArgLabel); len(l) > 0 {
		if o.Label, err = labels.Parse(string(l)); err != nil {
			return fmt.Errorf("%w: label selector: %w", wire.ErrBadRequest, err)
		}
	}
	if f := args.Peek(wire.ArgField); len(f) > 0 {
		if o.Field, err = parseFields(string(f), rng.Resource); err != nil {
			return err
		}
	}
	snap, err := s.snapshot(r, args)
	if err != nil {
		return err
	}
	ep := s.entryBuf()
	items, res := snap.List((*ep)[:0], o)
	defer func() {
		clear(items) // the pool must not keep entries alive
		*ep = items[:0]
		s.entries.Put(ep)
	}()
	cont := ""
	if res.More && len(items) > 0 {
		cont = items[len(items)-1].Key
	}

	body := newListBody()
	for _, e := range items {
		data, err := object(e, protobuf)
		if err != nil {
			body.Close()
			return err
		}
		body.add(data)
	}
	h := wire.AppendUvarint(body.head, uint64(snap.Revision))
	h = wire.AppendUvarint(h, uint64(res.Remaining))
	h = wire.AppendString(h, cont)
	body.head = wire.AppendUvarint(h, uint64(len(body.items)))
	body.size += int64(len(body.head))
	ctx.SetBodyStream(body, int(body.size))
	return nil
}

// parseFields parses a field selector and checks that the resource
// supports each field, as kube-apiserver does.
func parseFields(s string, res *registry.Resource) (fields.Selector, error) {
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return nil, fmt.Errorf("%w: field selector: %w", wire.ErrBadRequest, err)
	}
	for _, req := range sel.Requirements() {
		if !res.SupportsField(req.Field) {
			return nil, fmt.Errorf("%w: field label not supported: %s", wire.ErrBadRequest, req.Field)
		}
	}
	return sel, nil
}

func (s *Server) entryBuf() *[]*store.Entry {
	if p, ok := s.entries.Get().(*[]*store.Entry); ok {
		return p
	}
	b := make([]*store.Entry, 0, 512)
	return &b
}

func (s *Server) events(ctx *fasthttp.RequestCtx) error {
	args := ctx.QueryArgs()
	r, err := s.rangeOf(args)
	if err != nil {
		return err
	}
	since, err := intArg(args, wire.ArgSince)
	if err != nil {
		return err
	}
	ip, _ := s.items.Get().(*[]*window.Item)
	if ip == nil {
		ip = new([]*window.Item)
	}
	defer s.items.Put(ip)
	items, seen, err := r.Since(since, (*ip)[:0], s.cfg.MaxEventBytes)
	if err != nil {
		return err
	}
	bp := s.buf()
	defer s.bufs.Put(bp)
	b := wire.AppendUvarint((*bp)[:0], uint64(seen))
	b = wire.AppendUvarint(b, uint64(len(items)))
	for _, it := range items {
		ev := &it.Event
		b = wire.AppendUvarint(b, uint64(ev.Size()))
		b = ev.AppendMarshal(b)
		if len(b) >= 64<<10 {
			ctx.Response.AppendBody(b)
			b = b[:0]
		}
	}
	ctx.Response.AppendBody(b)
	if cap(b) <= 1<<20 {
		*bp = b
	}
	clear(items)
	*ip = items[:0]
	return nil
}

// prefixMeets reports whether keys with prefix, [prefix, prefixEnd), meet
// the range; the store holds only the range's keys, so a wider prefix
// lists those.
func prefixMeets(prefix string, rng *ranges.Range) bool {
	end := prefixEnd(prefix)
	return prefix < rng.End && (end == "" || end > rng.Start)
}

// prefixEnd returns the smallest key greater than every key with prefix,
// or "" when there is none.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
