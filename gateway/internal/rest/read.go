package rest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// readFor turns a resourceVersion parameter into what the cache node
// serves: unset is a consistent read (etcd's current revision, learned
// through the shared batched call), "0" is whatever the cache has, N is
// not older than N unless match says Exact.
func (h *Handler) readFor(ctx context.Context, rvParam string, rv int64, match metav1.ResourceVersionMatch) (client.Read, error) {
	switch {
	case rvParam == "":
		cur, err := h.cfg.Revisions.Current(ctx)
		if err != nil {
			return client.Read{}, fmt.Errorf("cannot learn the current revision: %w", err)
		}
		return client.Read{ResourceVersion: cur, Match: string(metav1.ResourceVersionMatchNotOlderThan)}, nil
	case rv == 0:
		return client.Read{}, nil
	case match == metav1.ResourceVersionMatchExact:
		return client.Read{ResourceVersion: rv, Match: string(match)}, nil
	}
	return client.Read{ResourceVersion: rv, Match: string(metav1.ResourceVersionMatchNotOlderThan)}, nil
}

// cacheFormat is the form to ask a cache node for: bare protobuf only when
// the client gets the object itself in protobuf.
func cacheFormat(m negotiate.Media) client.Format {
	if m.Format == negotiate.Protobuf && m.As == negotiate.AsObject {
		return client.Protobuf
	}
	return client.JSON
}

func (h *Handler) rangeOf(key string) (*ranges.Range, error) {
	rng, ok := h.cfg.Ranges.Current().Lookup(key)
	if !ok {
		// The resource was removed after the request found it.
		return nil, fmt.Errorf("cannot find the range of key %q: %w", key, ErrNotFoundPath)
	}
	return rng, nil
}

func (h *Handler) get(ctx context.Context, r *request) error {
	if r.info.Subresource == "scale" {
		return h.getScale(ctx, r)
	}
	args := r.rc.QueryArgs()
	rvParam := string(args.Peek("resourceVersion"))
	var rv int64
	if rvParam != "" {
		var err error
		if rv, err = strconv.ParseInt(rvParam, 10, 64); err != nil || rv < 0 {
			return invalidRV(rvParam)
		}
	}
	if r.res.StorageKind.Kind != "" {
		obj, err := h.cfg.Store.Get(ctx, r.res, r.info.Namespace, r.info.Name, 0)
		if err != nil {
			return err
		}
		return h.writeObject(r, 200, obj)
	}
	read, err := h.readFor(ctx, rvParam, rv, "")
	if err != nil {
		return err
	}
	key := r.res.Key(r.info.Namespace, r.info.Name)
	rng, err := h.rangeOf(key)
	if err != nil {
		return err
	}
	format := cacheFormat(r.media)
	obj, err := h.cfg.Cache.Get(ctx, rng.ID, key, read, format)
	if errors.Is(err, storage.ErrRevisionTooLarge) && rvParam == "" {
		return h.consistentFallback(func() error {
			o, err := h.cfg.Store.Get(ctx, r.res, r.info.Namespace, r.info.Name, 0)
			if err != nil {
				return err
			}
			return h.writeObject(r, 200, o)
		})
	}
	if err != nil {
		return err
	}
	return h.writeCached(r, 200, obj.Data, format)
}

// listPage is what list and the initial events of a watch read.
type listPage struct {
	items     [][]byte
	revision  int64
	lastKey   string // set when more items remain
	remaining int64
}

// readList reads up to limit items (0: all) of the list prefix from the
// ranges it spans, all at one revision, starting after afterKey.
func (h *Handler) readList(ctx context.Context, r *request, o *listOptions, read client.Read, afterKey string, limit int64, format client.Format) (*listPage, error) {
	prefix := r.res.ListPrefix(r.info.Namespace)
	rngs := h.cfg.Ranges.Current().Intersecting(prefix)
	if len(rngs) == 0 {
		return nil, fmt.Errorf("cannot find a range for prefix %q: %w", prefix, ErrNotFoundPath)
	}
	page := &listPage{}
	asked := 0
	defer func() {
		if h.cfg.Metrics != nil && asked > 0 {
			h.cfg.Metrics.listRanges.Observe(float64(asked))
		}
	}()
	for i, rng := range rngs {
		if afterKey != "" && rng.End <= afterKey {
			continue
		}
		want := int64(0)
		if limit > 0 {
			want = limit - int64(len(page.items))
		}
		after := ""
		if afterKey != "" && rng.Contains(afterKey) {
			after = afterKey
		}
		asked++
		resp, err := h.cfg.Cache.List(ctx, rng.ID, client.ListOptions{
			Read: read, Prefix: prefix, Label: o.labelSelector, Field: o.fieldSelector,
			Limit: want, Continue: after, Format: format,
		})
		if err != nil {
			return nil, err
		}
		page.items = append(page.items, resp.Items...)
		page.revision = resp.Revision
		// Every further range answers at exactly this revision: one
		// snapshot across ranges.
		read = client.Read{ResourceVersion: resp.Revision, Match: string(metav1.ResourceVersionMatchExact)}
		if resp.Continue != "" {
			page.lastKey = resp.Continue
			page.remaining = resp.Remaining
			if i < len(rngs)-1 {
				page.remaining = 0 // unknown beyond this range
			}
			return page, nil
		}
		if limit > 0 && int64(len(page.items)) >= limit && i < len(rngs)-1 {
			// Full page at a range boundary: continue from the next range.
			// lastKey is what the next page starts after, and the next
			// range's Start may be an object's key (a split at "ns/name"):
			// continue after the greatest key below it instead.
			page.lastKey = justBefore(rngs[i+1].Start)
			return page, nil
		}
	}
	return page, nil
}

// justBefore returns a key that sorts below s and at or above every
// object key that sorts below s (keys are printable: no byte 0xff), so
// that a read "after" it starts at s.
func justBefore(s string) string {
	if s == "" {
		return s
	}
	last := s[len(s)-1]
	if last == 0 {
		return s[:len(s)-1]
	}
	return s[:len(s)-1] + string([]byte{last - 1, 0xff})
}

func (h *Handler) list(ctx context.Context, r *request) error {
	o, err := parseListOptions(r.rc.QueryArgs(), r.res, false)
	if err != nil {
		return err
	}
	if r.res.StorageKind.Kind != "" || h.selectsServed(r.res, o) {
		return h.listFromEtcd(ctx, r, o)
	}
	var read client.Read
	afterKey := ""
	switch {
	case o.cont != nil && o.cont.ResourceVersion == latestContinue:
		// An expired list continues, inconsistently, at the latest state.
		if read, err = h.readFor(ctx, "", 0, ""); err != nil {
			return err
		}
		afterKey = o.cont.afterKey(r.res)
	case o.cont != nil:
		read = client.Read{ResourceVersion: o.cont.ResourceVersion, Match: string(metav1.ResourceVersionMatchExact)}
		afterKey = o.cont.afterKey(r.res)
	default:
		if read, err = h.readFor(ctx, o.resourceVersion, o.rv, o.resourceVersionMatch); err != nil {
			return err
		}
	}
	format := cacheFormat(r.media)
	page, err := h.readList(ctx, r, o, read, afterKey, o.limit, format)
	switch {
	case errors.Is(err, storage.ErrCompacted) && read.Match == string(metav1.ResourceVersionMatchExact):
		// The cache no longer has that snapshot: read it from etcd.
		return h.listFromEtcd(ctx, r, o)
	case errors.Is(err, storage.ErrRevisionTooLarge) && o.resourceVersion == "" && o.cont == nil:
		return h.consistentFallback(func() error { return h.listFromEtcd(ctx, r, o) })
	case errors.Is(err, client.ErrBadRequest):
		return apierror.BadRequest(err.Error())
	case err != nil:
		return err
	}
	cont := ""
	var remaining *int64
	if page.lastKey != "" {
		if cont, err = encodeContinue(r.res, page.lastKey, page.revision); err != nil {
			return err
		}
		if o.labels.Empty() && o.fields.Empty() && page.remaining > 0 {
			n := page.remaining
			remaining = &n
		}
	}
	return h.writeList(r, page.items, format, page.revision, cont, remaining)
}

// listFromEtcd serves a list straight from etcd: the fallback when the
// cache cannot answer (a snapshot older than its window), and the path of
// resources stored as another kind. Selectors are applied here: to
// custom resources once converted to the requested version (each page
// converted in one call), as upstream's storage of that version selects
// them, since a selectable field's path or a label may differ between
// versions.
func (h *Handler) listFromEtcd(ctx context.Context, r *request, o *listOptions) error {
	opts := storage.ListOptions{Limit: o.limit}
	if o.cont != nil {
		if o.cont.ResourceVersion != latestContinue {
			opts.Revision = o.cont.ResourceVersion
		}
		opts.After = o.cont.afterKey(r.res)
	} else if o.resourceVersionMatch == metav1.ResourceVersionMatchExact {
		opts.Revision = o.rv
	}
	var objs []runtime.Object
	var res *storage.ListResult
	for {
		var err error
		res, err = h.cfg.Store.List(ctx, r.res, r.info.Namespace, opts)
		if errors.Is(err, storage.ErrCompacted) && o.cont != nil {
			fresh, ferr := o.cont.fresh()
			if ferr != nil {
				return apierror.ExpiredContinue("")
			}
			return apierror.ExpiredContinue(fresh)
		}
		if err != nil {
			return err
		}
		items := res.Items
		if r.res.CRD != nil {
			if items, err = h.servedCRs(r.res, res.Items); err != nil {
				return err
			}
		}
		for _, obj := range items {
			ok, err := h.matches(r, obj, o.labels, o.fields)
			if err != nil {
				return err
			}
			if ok {
				objs = append(objs, obj)
			}
		}
		// With selectors a page may come back short: read on until full.
		if res.Last == "" || o.limit == 0 || int64(len(objs)) >= o.limit {
			break
		}
		opts.Revision, opts.After = res.Revision, res.Last
		opts.Limit = o.limit - int64(len(objs))
	}
	served := objs
	if r.res.CRD == nil {
		served = make([]runtime.Object, 0, len(objs))
		for _, obj := range objs {
			s, err := h.toServed(r.res, obj)
			if err != nil {
				return err
			}
			served = append(served, s)
		}
	}
	cont := ""
	var remaining *int64
	if res.Last != "" {
		var err error
		if cont, err = encodeContinue(r.res, res.Last, res.Revision); err != nil {
			return err
		}
		if o.labels.Empty() && o.fields.Empty() {
			n := res.Remaining
			remaining = &n
		}
	}
	return h.writeObjectList(r, served, res.Revision, cont, remaining)
}

// consistentFallback answers a consistent read the cache could not serve
// in time: from etcd, or (the default, to keep a lagging cache from
// turning into a storm on etcd) 429 with Retry-After.
func (h *Handler) consistentFallback(fromEtcd func() error) error {
	if h.cfg.ConsistentReadFallback == FallbackEtcd {
		return fromEtcd()
	}
	return apierror.TooManyRequests("the cache is catching up with etcd; try again shortly", 1)
}

// selectsServed reports whether o's selectors must be applied to objects
// of res converted to the served version, in the gateway, rather than by
// the cache nodes to objects as stored: a custom resource of several
// versions (objects may be stored in any of them), selected on a
// selectable field (each version has its own paths) or on labels a
// conversion webhook may change. Upstream's storage of each version
// selects its own converted objects.
func (h *Handler) selectsServed(res *registry.Resource, o *listOptions) bool {
	c, ok := h.cfg.Semantics.(crConverter)
	if res.CRD == nil || !ok || !c.ConvertsReads(res) {
		return false
	}
	if conv := res.CRD.Spec.Conversion; !o.labels.Empty() && conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter {
		return true
	}
	for _, req := range o.fields.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return true
		}
	}
	return false
}

// matches applies selectors to a typed stored object.
func (h *Handler) matches(r *request, obj runtime.Object, ls labels.Selector, fs fields.Selector) (bool, error) {
	m, err := objectMeta(obj)
	if err != nil {
		return false, err
	}
	if !ls.Empty() && !ls.Matches(labels.Set(m.GetLabels())) {
		return false, nil
	}
	if fs.Empty() {
		return true, nil
	}
	set := fields.Set{"metadata.name": m.GetName()}
	if r.res.Namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	if r.res.Fields != nil {
		for k, v := range r.res.Fields(obj) {
			set[k] = v
		}
	}
	return fs.Matches(set), nil
}
