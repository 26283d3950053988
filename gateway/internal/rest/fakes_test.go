package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// world is the state the fake store and the fake cache share: objects by
// etcd key and the etcd revision. The cache is always caught up unless a
// test injects an error.
type world struct {
	mu      sync.Mutex
	codec   *codec.Codec
	rev     int64
	objs    map[string]runtime.Object // key → stored object (its RV set)
	modRevs map[string]int64
}

func (w *world) keys(prefix, after string) []string {
	var ks []string
	for k := range w.objs {
		if strings.HasPrefix(k, prefix) && k > after {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

func (w *world) put(key string, obj runtime.Object) runtime.Object {
	w.rev++
	obj = obj.DeepCopyObject()
	m, _ := objectMeta(obj)
	m.SetResourceVersion(fmt.Sprint(w.rev))
	w.objs[key] = obj
	w.modRevs[key] = w.rev
	return obj.DeepCopyObject()
}

// fakeStore is objectStore over the world; err* inject errors.
type fakeStore struct {
	w *world

	mu        sync.Mutex // guards what follows
	calls     []string
	getErr    error
	listErr   []error // consumed one per List call
	createErr error
	updateErr error
	deleteErr error
	// conflicts makes Update run f this many extra times first, as
	// storage does after a conflict.
	conflicts int
	// clashes makes this many Creates answer ErrAlreadyExists first, as
	// if their names were taken; tried records every name Create saw.
	clashes int
	tried   []string
	// tooLarge makes Create and Update refuse objects that carry
	// managedFields as too large for etcd.
	tooLarge bool
	lastList []storage.ListOptions
	lastPre  storage.Preconditions
	lastGet  int64
	created  runtime.Object
}

func (s *fakeStore) record(call string) {
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
}

func (s *fakeStore) called(call string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.calls, call)
}

func (s *fakeStore) Get(_ context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error) {
	s.record("get")
	s.lastGet = rev
	if s.getErr != nil {
		return nil, s.getErr
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	obj, ok := s.w.objs[res.Key(ns, name)]
	if !ok {
		return nil, fmt.Errorf("cannot get: %w", storage.ErrNotFound)
	}
	return obj.DeepCopyObject(), nil
}

func (s *fakeStore) List(_ context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error) {
	s.record("list")
	s.lastList = append(s.lastList, opts)
	if len(s.listErr) > 0 {
		err := s.listErr[0]
		s.listErr = s.listErr[1:]
		if err != nil {
			return nil, err
		}
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	ks := s.w.keys(res.ListPrefix(ns), opts.After)
	out := &storage.ListResult{Revision: s.w.rev}
	if opts.Revision != 0 {
		out.Revision = opts.Revision
	}
	for i, k := range ks {
		if opts.Limit > 0 && int64(i) == opts.Limit {
			out.Last = ks[i-1]
			out.Remaining = int64(len(ks) - i)
			break
		}
		out.Items = append(out.Items, s.w.objs[k].DeepCopyObject())
	}
	return out, nil
}

func (s *fakeStore) Create(_ context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	s.record("create")
	s.created = obj.DeepCopyObject()
	if s.createErr != nil {
		return nil, s.createErr
	}
	m, err := objectMeta(obj)
	if err != nil {
		return nil, err
	}
	if s.tooLarge && len(m.GetManagedFields()) > 0 {
		return nil, fmt.Errorf("cannot create: %w", storage.ErrTooLarge)
	}
	s.mu.Lock()
	s.tried = append(s.tried, m.GetName())
	clash := s.clashes > 0
	s.clashes--
	s.mu.Unlock()
	if clash {
		return nil, fmt.Errorf("cannot create: %w", storage.ErrAlreadyExists)
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	key := res.Key(m.GetNamespace(), m.GetName())
	if _, ok := s.w.objs[key]; ok {
		return nil, fmt.Errorf("cannot create: %w", storage.ErrAlreadyExists)
	}
	m.SetUID(types.UID("uid-" + m.GetName()))
	return s.w.put(key, obj), nil
}

func (s *fakeStore) Update(_ context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, f storage.UpdateFunc) (runtime.Object, error) {
	s.record("update")
	s.lastPre = pre
	if s.updateErr != nil {
		return nil, s.updateErr
	}
	key := res.Key(ns, name)
	s.w.mu.Lock()
	cur, ok := s.w.objs[key]
	rev := s.w.modRevs[key]
	s.w.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("cannot update: %w", storage.ErrNotFound)
	}
	if pre.ResourceVersion != 0 && pre.ResourceVersion != rev {
		return nil, fmt.Errorf("cannot update: %w", storage.ErrConflict)
	}
	for range s.conflicts {
		if _, err := f(cur.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	next, err := f(cur.DeepCopyObject())
	if err != nil {
		return nil, err
	}
	if m, err := objectMeta(next); err == nil && s.tooLarge && len(m.GetManagedFields()) > 0 {
		return nil, fmt.Errorf("cannot update: %w", storage.ErrTooLarge)
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return s.w.put(key, next), nil
}

func (s *fakeStore) Delete(_ context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error) {
	s.record("delete")
	s.lastPre = pre
	if s.deleteErr != nil {
		return nil, false, s.deleteErr
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	key := res.Key(ns, name)
	cur, ok := s.w.objs[key]
	if !ok {
		return nil, false, fmt.Errorf("cannot delete: %w", storage.ErrNotFound)
	}
	next, action, err := decide(cur.DeepCopyObject())
	if err != nil {
		return nil, false, err
	}
	switch action {
	case storage.DeleteKeep:
		return cur.DeepCopyObject(), false, nil
	case storage.DeleteUpdate:
		return s.w.put(key, next), false, nil
	}
	delete(s.w.objs, key)
	delete(s.w.modRevs, key)
	s.w.rev++
	return cur.DeepCopyObject(), true, nil
}

// fakeCache is cacheReader over the world: it records what it is asked.
type fakeCache struct {
	w     *world
	table *ranges.Table // the cache answers for the keys of the range asked

	mu      sync.Mutex // guards what follows
	gets    []client.Read
	formats []client.Format
	lists   []listCall
	getErr  error
	listErr []error // consumed one per List call; nil entries succeed
}

type listCall struct {
	rangeID string
	opts    client.ListOptions
}

func (c *fakeCache) encode(obj runtime.Object, f client.Format) ([]byte, error) {
	if f == client.Protobuf {
		return c.w.codec.EncodeRawProtobuf(obj)
	}
	return c.w.codec.EncodeJSON(obj.DeepCopyObject())
}

func (c *fakeCache) Get(_ context.Context, rangeID, key string, r client.Read, f client.Format) (client.Object, error) {
	c.mu.Lock()
	c.gets = append(c.gets, r)
	c.formats = append(c.formats, f)
	err := c.getErr
	c.mu.Unlock()
	if err != nil {
		return client.Object{}, err
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	obj, ok := c.w.objs[key]
	if !ok {
		return client.Object{}, fmt.Errorf("cannot get %s: %w", key, storage.ErrNotFound)
	}
	data, err := c.encode(obj, f)
	return client.Object{Revision: c.w.modRevs[key], Data: data}, err
}

func (c *fakeCache) List(_ context.Context, rangeID string, o client.ListOptions) (*client.List, error) {
	c.mu.Lock()
	c.lists = append(c.lists, listCall{rangeID, o})
	var err error
	if len(c.listErr) > 0 {
		err, c.listErr = c.listErr[0], c.listErr[1:]
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	out := &client.List{Revision: c.w.rev}
	if o.Match == string(metav1.ResourceVersionMatchExact) {
		out.Revision = o.ResourceVersion
	}
	var ks []string
	for _, k := range c.w.keys(o.Prefix, o.Continue) {
		if o.Match == string(metav1.ResourceVersionMatchExact) && c.w.modRevs[k] > o.ResourceVersion {
			continue // not in that snapshot (deletions are not modelled)
		}
		if rng, ok := c.table.ByID(rangeID); !ok || rng.Contains(k) {
			ks = append(ks, k)
		}
	}
	for i, k := range ks {
		if o.Limit > 0 && int64(i) == o.Limit {
			out.Continue = ks[i-1]
			out.Remaining = int64(len(ks) - i)
			break
		}
		b, err := c.encode(c.w.objs[k], o.Format)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, b)
	}
	return out, nil
}

type fakeRevisions struct {
	mu    sync.Mutex
	w     *world
	calls int
	err   error
}

func (r *fakeRevisions) Current(context.Context) (int64, error) {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return r.w.rev, nil
}

// fakeAdmission records the phases it runs.
type fakeAdmission struct {
	mu          sync.Mutex
	calls       []string
	admitErr    error
	validateErr error
	warning     string
	// label: Admit adds this label to created and updated objects.
	label string
	// corrupt: Admit leaves managedFields invalid.
	corrupt bool
}

func (a *fakeAdmission) log(s string) {
	a.mu.Lock()
	a.calls = append(a.calls, s)
	a.mu.Unlock()
}

func (a *fakeAdmission) Admit(_ context.Context, at *admission.Attributes) error {
	a.log(fmt.Sprintf("admit %s %s/%s dry=%v", at.Operation, at.Namespace, at.Name, at.DryRun))
	if a.warning != "" {
		at.AddWarning(a.warning)
	}
	if a.label != "" && at.Object != nil {
		m, err := objectMeta(at.Object)
		if err != nil {
			return err
		}
		if m.GetLabels() == nil {
			m.SetLabels(map[string]string{})
		}
		m.GetLabels()[a.label] = "yes"
	}
	if a.corrupt && at.Object != nil {
		m, err := objectMeta(at.Object)
		if err != nil {
			return err
		}
		m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "outdated-webhook", Operation: "Bogus"}})
	}
	return a.admitErr
}

func (a *fakeAdmission) Validate(_ context.Context, at *admission.Attributes) error {
	a.log(fmt.Sprintf("validate %s", at.Operation))
	return a.validateErr
}

func (a *fakeAdmission) Finish(_ context.Context, at *admission.Attributes, stored runtime.Object, err error) {
	switch {
	case errors.Is(err, errRetried):
		a.log("finish retried")
	case err != nil:
		a.log("finish error")
	default:
		a.log("finish ok")
	}
}

func (a *fakeAdmission) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// env is a Handler over fakes.
type env struct {
	t     testing.TB
	reg   *registry.Registry
	h     *Handler
	w     *world
	store *fakeStore
	cache *fakeCache
	revs  *fakeRevisions
	hub   *fakeHub
	adm   *fakeAdmission
}

// upstream is the built-in semantics the tests share (building the
// upstream scheme takes a while).
var upstream struct {
	once sync.Once
	sem  *builtin.Semantics
	err  error
}

func semantics(t testing.TB) *builtin.Semantics {
	t.Helper()
	upstream.once.Do(func() { upstream.sem, upstream.err = builtin.New(registry.Builtin()) })
	if upstream.err != nil {
		t.Fatal(upstream.err)
	}
	return upstream.sem
}

func newEnv(t testing.TB, configure ...func(*Config)) *env {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	// Pods are split as clusters split them, so that lists and watches
	// of all namespaces span several ranges.
	table, err := ranges.WithSplits(reg, ranges.Config{Splits: map[string][]string{"pods": {"n"}}})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := negotiate.NewCodec(reg.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{codec: codec.New(reg.Scheme()), rev: 100, objs: map[string]runtime.Object{}, modRevs: map[string]int64{}}
	e := &env{
		t: t, reg: reg, w: w,
		store: &fakeStore{w: w}, cache: &fakeCache{w: w, table: table}, revs: &fakeRevisions{w: w},
		hub: newFakeHub(), adm: &fakeAdmission{},
	}
	cfg := Config{
		Registry: reg, Ranges: table, Store: e.store, Cache: e.cache, Revisions: e.revs, Hub: e.hub,
		Codec: nc, StorageCodec: w.codec, Logger: slog.New(slog.DiscardHandler), Admission: e.adm,
		Semantics: semantics(t),
	}
	for _, f := range configure {
		f(&cfg)
	}
	if e.h, err = New(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// seed stores objects of res directly (at increasing revisions).
func (e *env) seed(gvr schema.GroupVersionResource, objs ...runtime.Object) {
	e.t.Helper()
	res := e.resource(gvr)
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	for _, obj := range objs {
		m, err := objectMeta(obj)
		if err != nil {
			e.t.Fatal(err)
		}
		if m.GetUID() == "" {
			m.SetUID(types.UID("uid-" + m.GetName()))
		}
		e.w.put(res.Key(m.GetNamespace(), m.GetName()), obj)
	}
}

func (e *env) resource(gvr schema.GroupVersionResource) *registry.Resource {
	e.t.Helper()
	res, ok := e.reg.Lookup(gvr)
	if !ok {
		e.t.Fatalf("%v not registered", gvr)
	}
	return res
}

func (e *env) stored(gvr schema.GroupVersionResource, ns, name string) runtime.Object {
	e.t.Helper()
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	obj, ok := e.w.objs[e.resource(gvr).Key(ns, name)]
	if !ok {
		return nil
	}
	return obj.DeepCopyObject()
}

// response is what a client would see: the status code, headers and
// body, or the Status the gateway makes of the handler's error.
type response struct {
	code   int
	ctype  string
	body   []byte
	status *metav1.Status // the error's Status, when Serve failed
	header *fasthttp.ResponseHeader
}

// request is one call: method, URI (path and query), optional body and
// header pairs.
func (e *env) do(method, uri string, body []byte, header ...string) response {
	e.t.Helper()
	rc := &fasthttp.RequestCtx{}
	rc.Request.Header.SetMethod(method)
	rc.Request.SetRequestURI(uri)
	for i := 0; i+1 < len(header); i += 2 {
		rc.Request.Header.Set(header[i], header[i+1])
	}
	if body != nil {
		rc.Request.SetBody(body)
		if len(rc.Request.Header.ContentType()) == 0 {
			rc.Request.Header.SetContentType("application/json")
		}
	}
	var info requestinfo.Info
	if err := requestinfo.ParseBytes(&info, rc.Method(), rc.Path(), rc.QueryArgs()); err != nil {
		e.t.Fatalf("%s %s: %v", method, uri, err)
	}
	res := e.resource(schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource})
	SetUser(rc, nil)
	err := e.h.Serve(rc, &info, res)
	out := response{header: &rc.Response.Header}
	if errors.Is(err, ErrNotFoundPath) {
		// As the gateway's writeError: a plain 404.
		out.status = &metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound}
		out.code = 404
		return out
	}
	if err != nil {
		name := info.Name
		if n, ok := ObjectName(err); ok {
			name = n
		}
		out.status = apierror.Status(err, res.GVR().GroupResource(), name)
		out.code = int(out.status.Code)
		return out
	}
	out.code = rc.Response.StatusCode()
	out.ctype = string(rc.Response.Header.ContentType())
	out.body = slices.Clone(rc.Response.Body())
	return out
}

// reason is the Status reason of an error response, "" for success.
func (r response) reason() metav1.StatusReason {
	if r.status == nil {
		return ""
	}
	return r.status.Reason
}

func (r response) decode(t *testing.T, into any) {
	t.Helper()
	if r.status != nil {
		t.Fatalf("error response %d: %s", r.code, r.status.Message)
	}
	if err := json.Unmarshal(r.body, into); err != nil {
		t.Fatalf("cannot decode %s: %v", r.body, err)
	}
}

func pod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	podsGVR        = corev1.SchemeGroupVersion.WithResource("pods")
	configmapsGVR  = corev1.SchemeGroupVersion.WithResource("configmaps")
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// fakeHub hands out fake streams fed by the test.
type fakeHub struct {
	mu      sync.Mutex
	watches []*fakeStream
	started chan *fakeStream
	err     error
}

func newFakeHub() *fakeHub { return &fakeHub{started: make(chan *fakeStream, 16)} }

func (h *fakeHub) WatchRanges(ids []string, since int64, f watchhub.Filter) (watchhub.Stream, error) {
	if h.err != nil {
		return nil, h.err
	}
	s := &fakeStream{ids: ids, since: since, filter: f, in: make(chan any, 16), closed: make(chan struct{}), last: since}
	h.mu.Lock()
	h.watches = append(h.watches, s)
	h.mu.Unlock()
	h.started <- s
	return s, nil
}

// fakeStream delivers what the test sends on in: a watchhub.Delivery or
// an error (which Next returns).
type fakeStream struct {
	ids    []string
	since  int64
	filter watchhub.Filter
	in     chan any
	held   error // taken by Ready, returned by the next Next

	mu        sync.Mutex
	last      int64
	closeOnce sync.Once
	closed    chan struct{}
}

func (s *fakeStream) Next(ctx context.Context) (watchhub.Delivery, error) {
	if err := s.held; err != nil {
		s.held = nil
		return watchhub.Delivery{}, err
	}
	select {
	case v := <-s.in:
		if err, ok := v.(error); ok {
			return watchhub.Delivery{}, err
		}
		return s.take(v.(watchhub.Delivery)), nil
	case <-ctx.Done():
		return watchhub.Delivery{}, ctx.Err()
	}
}

// Ready takes a delivery the test has sent already; an error is held
// for Next, as the hub's streams do.
func (s *fakeStream) Ready() (watchhub.Delivery, bool) {
	if s.held != nil {
		return watchhub.Delivery{}, false
	}
	select {
	case v := <-s.in:
		if err, ok := v.(error); ok {
			s.held = err
			return watchhub.Delivery{}, false
		}
		return s.take(v.(watchhub.Delivery)), true
	default:
		return watchhub.Delivery{}, false
	}
}

// take records d as the stream's last delivery.
func (s *fakeStream) take(d watchhub.Delivery) watchhub.Delivery {
	s.mu.Lock()
	s.last = d.Rev
	s.mu.Unlock()
	return d
}

func (s *fakeStream) Last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *fakeStream) setLast(rev int64) {
	s.mu.Lock()
	s.last = rev
	s.mu.Unlock()
}

func (s *fakeStream) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

func jsonUnmarshal(b []byte, into any) error { return json.Unmarshal(b, into) }
