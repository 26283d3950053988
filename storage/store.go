package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/registry"
)

// DefaultMaxRequestBytes is etcd's default limit on the size of one request
// (--max-request-bytes).
const DefaultMaxRequestBytes = 1536 * 1024

// txnOverhead is what a transaction of kgate adds to the key (counted three
// times: compare, then, else) and the value, generously.
const txnOverhead = 512

// Config configures a Store.
type Config struct {
	// Client talks to etcd; required.
	Client *clientv3.Client
	// Registry makes the typed objects of the storage kinds; required.
	Registry *registry.Registry
	// Codec encodes and decodes stored values; required.
	Codec *codec.Codec
	// Logger is required.
	Logger *slog.Logger
	// Now returns the time of creation and deletion timestamps. Default
	// time.Now.
	Now func() time.Time
	// MaxRequestBytes is the etcd server's request size limit; writes of
	// larger objects fail with ErrInvalidObject before reaching etcd.
	// Default DefaultMaxRequestBytes.
	MaxRequestBytes int
	// EventTTL, when positive, is how long events (core/v1 and
	// events.k8s.io, both stored as core/v1 Events) live after their last
	// write, kube-apiserver's --event-ttl: each create and update puts the
	// event under an etcd lease, shared by the events of a short window as
	// upstream's lease manager does. Rounded down to whole seconds (at
	// least one). Zero keeps events until deleted.
	EventTTL time.Duration
	// MediaType is how built-in objects are stored: MediaTypeProtobuf
	// (the default, kube-apiserver's: "k8s\x00" and a runtime.Unknown
	// envelope) or MediaTypeJSON. Custom resources are always JSON.
	MediaType string
	// Transformers encrypt and decrypt stored values
	// (--encryption-provider-config); nil stores them as they are.
	Transformers *encryption.Transformers
	// Metrics, when set, registers kube-apiserver's etcd request metrics
	// (etcd_request_duration_seconds, etcd_requests_total,
	// etcd_request_errors_total).
	Metrics prometheus.Registerer
}

// Store reads and writes typed objects in etcd with kube-apiserver's key
// layout and optimistic concurrency. It is safe for concurrent use.
//
// Objects are runtime.Objects of the resource's storage kind
// (Registry.NewStored). metadata.resourceVersion of a returned object is the
// etcd mod revision of its key in decimal; it is never stored.
type Store struct {
	eventTTL   int64   // seconds; 0: events live until deleted
	leases     *leases // of objects with a TTL
	kv         clientv3.KV
	registry   *registry.Registry
	codec      *codec.Codec
	logger     *slog.Logger
	now        func() time.Time
	maxRequest int
	protobuf   bool                     // store built-in objects as protobuf
	values     *encryption.Transformers // nil: values stored as they are
	metrics    *metrics                 // nil: none
}

// New returns a Store.
func New(cfg Config) (*Store, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("cannot create store: Client is required")
	case cfg.Registry == nil:
		return nil, errors.New("cannot create store: Registry is required")
	case cfg.Codec == nil:
		return nil, errors.New("cannot create store: Codec is required")
	case cfg.Logger == nil:
		return nil, errors.New("cannot create store: Logger is required")
	case cfg.MaxRequestBytes < 0:
		return nil, errors.New("cannot create store: negative MaxRequestBytes")
	case cfg.EventTTL < 0:
		return nil, errors.New("cannot create store: negative EventTTL")
	case cfg.MediaType != "" && cfg.MediaType != MediaTypeJSON && cfg.MediaType != MediaTypeProtobuf:
		return nil, fmt.Errorf("cannot create store: storage media type %q is neither %s nor %s", cfg.MediaType, MediaTypeJSON, MediaTypeProtobuf)
	}
	if cfg.MediaType == "" {
		cfg.MediaType = MediaTypeProtobuf
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	var ttl int64
	if cfg.EventTTL > 0 {
		ttl = max(int64(cfg.EventTTL/time.Second), 1)
	}
	m, err := newMetrics(cfg.Metrics, cfg.Client)
	if err != nil {
		return nil, err
	}
	return &Store{
		metrics:    m,
		eventTTL:   ttl,
		leases:     &leases{client: cfg.Client.Lease, now: cfg.Now},
		kv:         RequireLeader(cfg.Client.KV),
		registry:   cfg.Registry,
		codec:      cfg.Codec,
		logger:     cfg.Logger,
		now:        cfg.Now,
		maxRequest: cfg.MaxRequestBytes,
		protobuf:   cfg.MediaType == MediaTypeProtobuf,
		values:     cfg.Transformers,
	}, nil
}

// Storage media types (kube-apiserver's --storage-media-type).
const (
	MediaTypeJSON     = "application/json"
	MediaTypeProtobuf = "application/vnd.kubernetes.protobuf"
)

// ListOptions selects a page of a List.
type ListOptions struct {
	// Revision reads at this etcd revision; 0 reads the latest,
	// linearizably. Pass ListResult.Revision for the next pages.
	Revision int64
	// Limit is the most items returned; 0 means all.
	Limit int64
	// After is the exclusive start key: the ListResult.Last of the
	// previous page. Empty starts at the beginning.
	After string
}

// ListResult is one page of a List.
type ListResult struct {
	Items []runtime.Object
	// Revision is the etcd revision the page was read at.
	Revision int64
	// Last is the key of the last item when more items remain, else "".
	Last string
	// Remaining is how many items follow this page.
	Remaining int64
}

// Preconditions must hold for an update or delete to happen. Zero values
// are not checked.
type Preconditions struct {
	ResourceVersion int64
	UID             string
}

// check returns ErrConflict unless the preconditions hold for m stored at
// mod revision rev.
func (p Preconditions) check(m metav1.Object, rev int64) error {
	if p.ResourceVersion != 0 && p.ResourceVersion != rev {
		return fmt.Errorf("precondition resourceVersion %d does not match %d: %w", p.ResourceVersion, rev, ErrConflict)
	}
	if p.UID != "" && p.UID != string(m.GetUID()) {
		return fmt.Errorf("precondition uid %s does not match %s: %w", p.UID, m.GetUID(), ErrConflict)
	}
	return nil
}

// Get returns the object at namespace/name (namespace is ignored for
// cluster-scoped resources). rev 0 reads the latest state linearizably;
// rev > 0 reads the state at that revision (ErrCompacted when compacted,
// ErrRevisionTooLarge when in the future). ErrNotFound when missing.
func (s *Store) Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error) {
	start := time.Now()
	obj, err := s.get(ctx, res, ns, name, rev)
	s.metrics.record("get", res, start, err)
	return obj, err
}

func (s *Store) get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error) {
	key, err := objectKey(res, ns, name)
	if err != nil {
		return nil, fmt.Errorf("cannot get %s: %w", describe(res, ns, name), err)
	}
	var resp *clientv3.GetResponse
	if rev > 0 {
		resp, err = s.kv.Get(ctx, key, clientv3.WithRev(rev))
	} else {
		resp, err = s.kv.Get(ctx, key)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get %s: %w", describe(res, ns, name), etcdError(err))
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("cannot get %s: %w", describe(res, ns, name), ErrNotFound)
	}
	return s.decode(ctx, res, resp.Kvs[0])
}

// List reads objects of res in namespace ns (all namespaces when empty)
// straight from etcd, in key order, one page per call. All pages read with
// the first page's Revision are one consistent snapshot.
func (s *Store) List(ctx context.Context, res *registry.Resource, ns string, opts ListOptions) (*ListResult, error) {
	start := time.Now()
	out, err := s.list(ctx, res, ns, opts)
	s.metrics.record("list", res, start, err)
	return out, err
}

func (s *Store) list(ctx context.Context, res *registry.Resource, ns string, opts ListOptions) (*ListResult, error) {
	what := res.Resource
	if res.Namespaced && ns != "" {
		what += " in " + ns
	}
	if strings.Contains(ns, "/") || opts.Limit < 0 {
		return nil, fmt.Errorf("cannot list %s: bad namespace or limit: %w", what, ErrInvalidObject)
	}
	prefix := res.ListPrefix(ns)
	end := clientv3.GetPrefixRangeEnd(prefix)
	start := prefix
	if opts.After != "" && opts.After >= prefix {
		start = opts.After + "\x00"
	}
	if start > end {
		start = end // an empty range, still read for its revision
	}
	opOpts := make([]clientv3.OpOption, 0, 3)
	opOpts = append(opOpts, clientv3.WithRange(end))
	if opts.Limit > 0 {
		opOpts = append(opOpts, clientv3.WithLimit(opts.Limit))
	}
	if opts.Revision > 0 {
		opOpts = append(opOpts, clientv3.WithRev(opts.Revision))
	}
	resp, err := s.kv.Get(ctx, start, opOpts...)
	if err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", what, etcdError(err))
	}
	out := &ListResult{Items: make([]runtime.Object, 0, len(resp.Kvs)), Revision: opts.Revision}
	if out.Revision == 0 {
		out.Revision = resp.Header.Revision
	}
	for _, kv := range resp.Kvs {
		obj, err := s.decode(ctx, res, kv)
		if err != nil {
			return nil, fmt.Errorf("cannot list %s: %w", what, err)
		}
		out.Items = append(out.Items, obj)
	}
	if resp.More && len(resp.Kvs) > 0 {
		out.Last = string(resp.Kvs[len(resp.Kvs)-1].Key)
		out.Remaining = resp.Count - int64(len(resp.Kvs))
	}
	return out, nil
}

// decode returns the typed object stored in kv, with its kind and
// resourceVersion set.
func (s *Store) decode(ctx context.Context, res *registry.Resource, kv *mvccpb.KeyValue) (runtime.Object, error) {
	obj, _, err := s.decodeStored(ctx, res, kv)
	return obj, err
}

// stored is a value as read: the object's encoding once decrypted, and
// whether it was encrypted with other than the writing provider.
type stored struct {
	data  []byte
	stale bool
}

// decodeStored is decode, also returning the decrypted value.
func (s *Store) decodeStored(ctx context.Context, res *registry.Resource, kv *mvccpb.KeyValue) (runtime.Object, stored, error) {
	data, stale, err := s.values.FromStorage(ctx, res.GVR().GroupResource(), string(kv.Key), kv.Value)
	if err != nil {
		return nil, stored{}, fmt.Errorf("%w: %w", ErrInvalidObject, err)
	}
	was := stored{data, stale}
	obj, err := s.registry.NewStored(res)
	if err != nil {
		return nil, was, fmt.Errorf("cannot decode %s: %w: %w", kv.Key, ErrInvalidObject, err)
	}
	if err := s.codec.Decode(data, obj); err != nil {
		return nil, was, fmt.Errorf("cannot decode %s: %w: %w", kv.Key, ErrInvalidObject, err)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, was, fmt.Errorf("cannot decode %s: %w: %w", kv.Key, ErrInvalidObject, err)
	}
	// Protobuf values do not carry the kind in the object itself.
	obj.GetObjectKind().SetGroupVersionKind(res.StorageGVK())
	m.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
	return obj, was, nil
}

// encode returns obj, an object of res to store at key, without
// resourceVersion: its encoding (data) and the value to store (sealed:
// data encrypted as configured). It fails with ErrTooLarge when etcd
// would refuse the value for its size.
func (s *Store) encode(ctx context.Context, res *registry.Resource, key string, obj runtime.Object, m metav1.Object) (data, sealed []byte, err error) {
	m.SetResourceVersion("")
	if s.protobuf && !res.Unstructured() {
		data, err = s.codec.EncodeProtobuf(obj)
	} else {
		data, err = s.codec.EncodeJSON(obj)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidObject, err)
	}
	if sealed, err = s.values.ToStorage(ctx, res.GVR().GroupResource(), key, data); err != nil {
		return nil, nil, err
	}
	if n := len(sealed) + 3*len(key) + txnOverhead; n > s.maxRequest {
		return nil, nil, fmt.Errorf("object of %d bytes is too large for etcd (limit %d bytes per request): %w", len(sealed), s.maxRequest, ErrTooLarge)
	}
	return data, sealed, nil
}

// sameAsStored reports whether obj, encoded as data, is what was stored,
// so that writing it would change nothing. A value stored in the other
// encoding (written by kube-apiserver, or before a change of media type)
// is compared in its own; one encrypted with an old provider is never
// the same, so that an update rewrites it with the current one.
func (s *Store) sameAsStored(obj runtime.Object, data []byte, was stored) bool {
	if was.stale {
		return false
	}
	switch {
	case codec.IsProtobuf(was.data) == codec.IsProtobuf(data):
		return bytes.Equal(data, was.data)
	case codec.IsProtobuf(was.data):
		pb, err := s.codec.EncodeProtobuf(obj)
		return err == nil && bytes.Equal(pb, was.data)
	default:
		js, err := s.codec.EncodeJSON(obj)
		return err == nil && bytes.Equal(js, was.data)
	}
}

// checkObject returns the metadata of obj, which must be of the storage
// kind of res.
func (s *Store) checkObject(res *registry.Resource, obj runtime.Object) (metav1.Object, error) {
	if obj == nil {
		return nil, fmt.Errorf("no object: %w", ErrInvalidObject)
	}
	gvk, err := s.codec.Kind(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidObject, err)
	}
	if gvk != res.StorageGVK() {
		return nil, fmt.Errorf("object of kind %v, want %v: %w", gvk, res.StorageGVK(), ErrInvalidObject)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidObject, err)
	}
	return m, nil
}

// eventKind is the storage kind of events of both groups.
var eventKind = schema.GroupVersionKind{Version: "v1", Kind: "Event"}

// putOp returns the put of value at key for an object of res: under a
// lease when the resource's objects have a time to live (events with
// EventTTL), as upstream's event store's TTLFunc does on create and update.
func (s *Store) putOp(ctx context.Context, res *registry.Resource, key string, value []byte) (clientv3.Op, error) {
	if s.eventTTL == 0 || res.StorageGVK() != eventKind {
		return clientv3.OpPut(key, bytesToString(value)), nil
	}
	id, err := s.leases.get(ctx, s.eventTTL)
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(key, bytesToString(value), clientv3.WithLease(id)), nil
}

// txnResult is the outcome of a guarded write.
type txnResult struct {
	ok       bool
	revision int64            // the write's revision when ok
	latest   *mvccpb.KeyValue // the key's current state when not ok; nil when gone
}

// commitIf runs op if key is still at mod revision rev, and otherwise reads
// key.
func (s *Store) commitIf(ctx context.Context, key string, rev int64, op clientv3.Op) (txnResult, error) {
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(op).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return txnResult{}, etcdError(err)
	}
	if resp.Succeeded {
		return txnResult{ok: true, revision: resp.Header.Revision}, nil
	}
	var latest *mvccpb.KeyValue
	if len(resp.Responses) > 0 {
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			latest = r.Kvs[0]
		}
	}
	return txnResult{latest: latest}, nil
}

// getKV reads key linearizably; nil when missing.
func (s *Store) getKV(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	resp, err := s.kv.Get(ctx, key)
	if err != nil {
		return nil, etcdError(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0], nil
}

// bytesToString returns b as a string without copying. b must never change
// afterwards: used for encoded values handed to etcd.
func bytesToString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// objectKey returns the etcd key of namespace/name, refusing names that
// would address another key.
func objectKey(res *registry.Resource, ns, name string) (string, error) {
	if res.Namespaced && !validSegment(ns) {
		return "", fmt.Errorf("bad namespace %q: %w", ns, ErrInvalidObject)
	}
	if !validSegment(name) {
		return "", fmt.Errorf("bad name %q: %w", name, ErrInvalidObject)
	}
	return res.Key(ns, name), nil
}

func validSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.Contains(s, "/")
}

// describe names an object in errors: "pods default/p1", "nodes n1",
// "deployments.apps default/d".
func describe(res *registry.Resource, ns, name string) string {
	r := res.Resource
	if res.Group != "" {
		r += "." + res.Group
	}
	if res.Namespaced {
		return r + " " + ns + "/" + name
	}
	return r + " " + name
}

// etcdError turns an etcd client error into a storage error. Context
// errors are returned as they are.
func etcdError(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %w", ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w: %w", ErrRevisionTooLarge, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	default:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
}

// setRevision sets metadata.resourceVersion to rev.
func setRevision(m metav1.Object, rev int64) {
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
}

// truncatedNow returns Now at the second precision of stored timestamps.
func (s *Store) truncatedNow() time.Time { return s.now().Truncate(time.Second) }
