// Package rest serves the Kubernetes REST verbs of registered resources:
// get, list and watch from cache nodes (and NATS), create, update, patch,
// delete and deletecollection straight to etcd through storage. Handlers
// return errors; the gateway turns them into metav1.Status in one place.
package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/hijacked"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/table"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// objectStore is the etcd-backed storage the write path uses.
type objectStore interface {
	Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error)
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, f storage.UpdateFunc) (runtime.Object, error)
	Delete(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error)
}

// cacheReader reads cache nodes.
type cacheReader interface {
	Get(ctx context.Context, rangeID, key string, r client.Read, f client.Format) (client.Object, error)
	List(ctx context.Context, rangeID string, o client.ListOptions) (*client.List, error)
}

// hub starts watches of ranges (watchhub.Hub).
type hub interface {
	WatchRanges(rangeIDs []string, since int64, filter watchhub.Filter) (watchhub.Stream, error)
}

// revisions tells etcd's current revision (batched).
type revisions interface {
	Current(ctx context.Context) (int64, error)
}

// Config configures a Handler.
type Config struct {
	Registry     *registry.Registry
	Ranges       ranges.Source
	Store        objectStore
	Cache        cacheReader
	Revisions    revisions
	Hub          hub
	Codec        *negotiate.Codec
	StorageCodec *codec.Codec
	// Metrics; nil records none.
	Metrics *Metrics
	// ServiceIPs allocates Service cluster IPs; nil allocates none.
	ServiceIPs serviceIPs
	// NodePorts allocates Service node ports; nil allocates none.
	NodePorts nodePorts
	// ConsistentReadFallback says what a consistent read does when the
	// cache node cannot reach etcd's revision in time: FallbackReject
	// (default: 429 with Retry-After) or FallbackEtcd.
	ConsistentReadFallback Fallback
	Logger                 *slog.Logger
	// RequestTimeout bounds non-watch requests. Default 60s.
	RequestTimeout time.Duration
	// MinWatchTimeout: a watch without timeoutSeconds lasts a random time
	// between it and twice it, as kube-apiserver's --min-request-timeout.
	// Default 30m.
	MinWatchTimeout time.Duration
	// BookmarkInterval between bookmarks of a watch that asked for them.
	// Default 1m (kube-apiserver's).
	BookmarkInterval time.Duration
	// WatchWriteTimeout bounds one write to a watch client. Default 30s.
	WatchWriteTimeout time.Duration
	// ListPageSize is the page size used when reading a list without a
	// limit. Default 500.
	ListPageSize int64
	// Admission checks and completes writes; nil admits everything.
	Admission Admission
	// Semantics is upstream's defaulting, strategies and validation of
	// the built-in resources (builtin.Semantics), run on every write.
	// Required.
	Semantics Semantics
	// FieldManager keeps managedFields and serves server-side apply; nil
	// manages no fields and answers apply patches 415.
	FieldManager fieldManager
}

// Fallback is what a consistent read does when the cache lags.
type Fallback string

// Fallbacks.
const (
	FallbackReject Fallback = "reject"
	FallbackEtcd   Fallback = "etcd"
)

// Handler serves resource requests.
type Handler struct {
	cfg     Config
	base    context.Context
	streams hijacked.Conns   // watch streams (watch.go)
	tables  *table.Converter // kubectl's tables, from upstream's printers
}

// New returns a handler; base is the gateway's lifetime: requests in
// flight end when it is cancelled.
func New(base context.Context, cfg Config) (*Handler, error) {
	if cfg.Registry == nil || cfg.Ranges == nil || cfg.Store == nil || cfg.Cache == nil ||
		cfg.Revisions == nil || cfg.Hub == nil || cfg.Codec == nil || cfg.StorageCodec == nil || cfg.Logger == nil || cfg.Semantics == nil {
		return nil, errors.New("cannot make REST handler: every dependency is required")
	}
	switch cfg.ConsistentReadFallback {
	case "":
		cfg.ConsistentReadFallback = FallbackReject
	case FallbackReject, FallbackEtcd:
	default:
		return nil, fmt.Errorf("cannot make REST handler: unknown consistent read fallback %q", cfg.ConsistentReadFallback)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 60 * time.Second
	}
	if cfg.MinWatchTimeout <= 0 {
		cfg.MinWatchTimeout = 30 * time.Minute
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = time.Minute
	}
	if cfg.WatchWriteTimeout <= 0 {
		cfg.WatchWriteTimeout = 30 * time.Second
	}
	if cfg.ListPageSize <= 0 {
		cfg.ListPageSize = 500
	}
	tables, err := table.New(cfg.Semantics.Scheme())
	if err != nil {
		return nil, fmt.Errorf("cannot make REST handler: %w", err)
	}
	return &Handler{cfg: cfg, base: base, tables: tables}, nil
}

// request is one parsed resource request.
// HeaderAuditID is the response header carrying the request's audit ID;
// the gateway sets it before a request reaches the handler.
const HeaderAuditID = "Audit-Id"

type request struct {
	rc    *fasthttp.RequestCtx // nil once a watch hijacked the connection
	info  *requestinfo.Info
	res   *registry.Resource
	media negotiate.Media
	// includeObject is the Table option, read up front: watches use it
	// after the request context is gone.
	includeObject string
	user          user.Info // who asks (SetUser), for Admission
	// attempt is the admission of an update's latest attempt: storage
	// runs the update again after a conflict (retried).
	attempt *admission.Attributes
	// applied: the write is a server-side apply whose managedFields the
	// field manager has recorded already.
	applied bool
	// dropManagedFields: the write is tried again without managedFields,
	// its result having been too large for etcd with them.
	dropManagedFields bool
	// serviceUpdate is what an update's attempts took from the cluster
	// IP and node port pools, and what the stored update frees.
	serviceUpdate *serviceUpdate
}

// Serve handles a resource request for res.
func (h *Handler) Serve(rc *fasthttp.RequestCtx, info *requestinfo.Info, res *registry.Resource) error {
	if err := checkSubresource(info, res); err != nil {
		return err
	}
	r := &request{rc: rc, info: info, res: res, includeObject: string(rc.QueryArgs().Peek("includeObject")), user: User(rc)}
	if info.Verb == "watch" {
		return h.watch(r)
	}
	m, err := negotiate.Negotiate(string(rc.Request.Header.Peek("Accept")), negotiate.Endpoint{Resource: true, Protobuf: !r.res.Unstructured()})
	if err != nil {
		return err
	}
	if negotiate.PrettyHint(string(rc.QueryArgs().Peek("pretty")), string(rc.UserAgent())) {
		m.Pretty = true
	}
	r.media = m
	// Not cancelled by the gateway's shutdown (h.base): a request in
	// flight finishes while the server drains.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.base), h.cfg.RequestTimeout)
	defer cancel()
	switch info.Verb {
	case "get":
		return h.get(ctx, r)
	case "list":
		return h.list(ctx, r)
	case "create":
		return h.create(ctx, r)
	case "update":
		return h.update(ctx, r)
	case "patch":
		return h.patch(ctx, r)
	case "delete":
		return h.delete(ctx, r)
	case "deletecollection":
		return h.deleteCollection(ctx, r)
	}
	return apierror.MethodNotSupported(res.GVR().GroupResource(), info.Verb)
}

// checkSubresource refuses verbs and subresources res does not serve.
func checkSubresource(info *requestinfo.Info, res *registry.Resource) error {
	gr := res.GVR().GroupResource()
	if info.Subresource == "" {
		for _, v := range res.SupportedVerbs() {
			if v == info.Verb {
				return nil
			}
		}
		return apierror.MethodNotSupported(gr, info.Verb)
	}
	if !res.HasSubresource(info.Subresource) || info.Name == "" {
		return notFoundPath()
	}
	switch info.Subresource {
	case "status", "scale", "finalize", "approval", "ephemeralcontainers", "resize":
		switch info.Verb {
		case "get", "update", "patch":
			if info.Subresource == "finalize" && info.Verb != "update" {
				return apierror.MethodNotSupported(gr, info.Verb)
			}
			return nil
		}
	case "binding", "eviction":
		if info.Verb == "create" {
			return nil
		}
	}
	return apierror.MethodNotSupported(gr, info.Verb)
}

// objectError carries the name of the object a request was about when the
// URL does not name it (a create), so its Status can.
type objectError struct {
	name string
	err  error
}

func (e *objectError) Error() string { return e.err.Error() }
func (e *objectError) Unwrap() error { return e.err }

// ObjectName returns the object name attached to err by a handler.
func ObjectName(err error) (string, bool) {
	var oe *objectError
	if errors.As(err, &oe) {
		return oe.name, true
	}
	return "", false
}

// ErrNotFoundPath is returned for a URL that names nothing served.
var ErrNotFoundPath = errors.New("rest: the server could not find the requested resource")

func notFoundPath() error { return ErrNotFoundPath }
