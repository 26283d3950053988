package watchcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// rvState is what the rows of TestResourceVersionTable share: a cluster,
// a namespace and the writes made in it.
type rvState struct {
	c    *Cluster
	cs   kubernetes.Interface
	http *http.Client
	host string
	ns   string
	hist *History

	mu    sync.Mutex         // guards model
	model map[string]*Object // by name

	// Revisions of the setup: a created, b created, a updated, c created.
	revA, revB, revA2, revC int64
	// token continues, at revision tokenRev, a LIST of one item per page.
	token    string
	tokenRev int64
	// compactedAt is where etcd was compacted before the second phase;
	// windowFrom where the restarted cache node's window begins.
	compactedAt, windowFrom int64
}

// TestResourceVersionTable checks each row of docs/design.md's resourceVersion
// table (kube-apiserver's semantics) for GET, LIST and WATCH, on one
// cache node and one gateway, with what kube-apiserver answers noted by
// each row (k8s.io/apiserver storage/cacher, storage/etcd3 and the
// ListOptions validation) and where kgate deliberately differs. Rows run in
// two phases: the second after etcd is compacted and the cache node
// restarted, so that its window begins after the compaction and old
// revisions are gone from both.
func TestResourceVersionTable(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Dir: t.TempDir(), Logger: testLogger(), BookmarkInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cannot close cluster: %v", err)
		}
	})
	s := newRVState(ctx, t, c)

	type part func(ctx context.Context, t *testing.T, s *rvState)
	// A row: nil parts do not apply (the comment says why); compacted
	// runs in the second phase.
	type row struct {
		name             string
		get, list, watch part
		compacted        part
		parallel         bool // slow (waits for a timeout): run beside the others
	}
	rows := []row{{
		// Unset: a consistent read. kube-apiserver: GET and LIST read
		// etcd's current revision (ConsistentListFromCache) and wait for
		// the watch cache to reach it; a WATCH without resourceVersion
		// starts from the watch cache as it is (the
		// WatchFromStorageWithoutResourceVersion gate is off), so it may
		// miss the last write. kgate serves all three consistently.
		name:  "unset",
		get:   rvGetConsistent,
		list:  rvListConsistent,
		watch: rvWatchConsistent,
	}, {
		// "0": whatever the cache has. kube-apiserver: the same, from
		// the watch cache.
		name:  "0",
		get:   rvGetAny,
		list:  rvListAny,
		watch: rvWatchAny,
	}, {
		// N, NotOlderThan, N in the past: the current state, at N or
		// newer. kube-apiserver: the same (GET has no
		// resourceVersionMatch; N means not older than N). WATCH from N
		// is the "watch from N" row.
		name: "N NotOlderThan, past",
		get:  rvGetNotOlderPast,
		list: rvListNotOlderPast,
	}, {
		// N, NotOlderThan, N in the future: kube-apiserver's watch cache
		// waits 3s (blockTimeout) for N, then 504 Timeout "Too large
		// resource version" with a ResourceVersionTooLarge cause and
		// Retry-After: 1 (resourceVersionTooHighRetrySeconds). A WATCH
		// from a future N is no error there: the stream opens and
		// delivers what comes after N; with sendInitialEvents=true it
		// waits 3s, then ends the 200 stream with that 504 Status as an
		// ERROR event (newErrWatcher). kgate answers the WatchList's 504
		// before the stream starts: it reads the first page first.
		name:     "N NotOlderThan, future",
		get:      rvGetFuture,
		list:     rvListFuture,
		watch:    rvWatchFuture,
		parallel: true,
	}, {
		// N, Exact: the state at exactly N. kube-apiserver: LIST only
		// (from etcd at N, or the watch cache's snapshots); 410 Expired
		// "The resourceVersion for the provided list is too old." once
		// etcd compacted N. GET has no resourceVersionMatch; WATCH
		// forbids Exact (see "bad combinations").
		name:      "N Exact",
		list:      rvListExact,
		compacted: rvListExactCompacted,
	}, {
		// continue: the snapshot revision of the first page. An expired
		// token: kube-apiserver (etcd3 store) answers 410 Expired with a
		// fresh token in metadata.continue that continues at the latest
		// revision ("inconsistent continue"). LIST only.
		name:      "continue",
		list:      rvContinue,
		compacted: rvContinueExpired,
	}, {
		// Watch from N: every event after N, in order, once.
		// kube-apiserver: from the watch cache; N older than its window:
		// a 200 stream with one ERROR event, 410 Expired "too old
		// resource version: N (M)".
		name:      "watch from N",
		watch:     rvWatchFrom,
		compacted: rvWatchTooOld,
	}, {
		// allowWatchBookmarks: BOOKMARK events carrying only the
		// latest resourceVersion (kube-apiserver: about every minute,
		// here BookmarkInterval 200ms); none without it.
		name:  "allowWatchBookmarks",
		watch: rvBookmarks,
	}, {
		// sendInitialEvents=true (WatchList): ADDED for the state, then
		// a BOOKMARK annotated k8s.io/initial-events-end: "true".
		// kube-apiserver: the same (consistent for resourceVersion unset,
		// not older than N otherwise).
		name:  "sendInitialEvents",
		watch: rvWatchList,
	}, {
		// Bad combinations. kube-apiserver (ValidateListOptions): 422
		// Invalid on ListOptions with FieldValueForbidden causes; kgate
		// gives FieldValueInvalid causes (logged). kube-apiserver 1.37
		// accepts sendInitialEvents=true without allowWatchBookmarks
		// (a 200 stream without the end bookmark, for compatibility);
		// kgate rejects it. An unparsable resourceVersion:
		// kube-apiserver's versioner fails with storage.InvalidError,
		// which its registry leaves unmapped for GET and LIST (500) and
		// turns into 422 for WATCH; kgate answers 400 BadRequest to all.
		name:  "bad combinations",
		get:   rvBadGet,
		list:  rvBadList,
		watch: rvBadWatch,
	}}

	run := func(phase string, parts func(r row) map[string]part) {
		t.Run(phase, func(t *testing.T) {
			for _, r := range rows {
				for verb, p := range parts(r) {
					if p == nil {
						continue
					}
					t.Run(r.name+"/"+verb, func(t *testing.T) {
						if r.parallel {
							t.Parallel()
						}
						p(ctx, t, s)
					})
				}
			}
		})
	}
	run("cached", func(r row) map[string]part {
		return map[string]part{"GET": r.get, "LIST": r.list, "WATCH": r.watch}
	})
	if t.Failed() && ctx.Err() != nil {
		return
	}
	s.compact(ctx, t)
	run("compacted", func(r row) map[string]part { return map[string]part{"410": r.compacted} })
}

func newRVState(ctx context.Context, t *testing.T, c *Cluster) *rvState {
	t.Helper()
	cfg, err := c.RESTConfig("watchcheck/rv-table", false)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &rvState{c: c, cs: newClientset(t, cfg), http: hc, host: cfg.Host, ns: "rv", hist: &History{}, model: map[string]*Object{}}
	createNamespaces(ctx, t, s.cs, s.ns)
	s.revA = s.create(ctx, t, "a", "1")
	s.revB = s.create(ctx, t, "b", "1")
	s.revA2 = s.update(ctx, t, "a", "2")
	s.revC = s.create(ctx, t, "c", "1")
	return s
}

// create, update and remove write through the API and record the write.
func (s *rvState) create(ctx context.Context, t *testing.T, name, v string) int64 {
	t.Helper()
	out, err := s.cs.CoreV1().ConfigMaps(s.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": v},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.record(t, Create, name, out)
}

func (s *rvState) update(ctx context.Context, t *testing.T, name, v string) int64 {
	t.Helper()
	cm, err := s.cs.CoreV1().ConfigMaps(s.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"v": v}
	out, err := s.cs.CoreV1().ConfigMaps(s.ns).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.record(t, Update, name, out)
}

func (s *rvState) record(t *testing.T, op Op, name string, out *corev1.ConfigMap) int64 {
	t.Helper()
	o, err := ObjectOf(out)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.hist.Insert(Write{Rev: o.RV, Op: op, Prev: s.model[name], Cur: o}); err != nil {
		t.Fatal(err)
	}
	s.model[name] = o
	return o.RV
}

// etcdState is etcd's state of the namespace at rev (0: now) and the
// revision read.
func (s *rvState) etcdState(ctx context.Context, t *testing.T, rev int64) (map[string]*Object, int64) {
	t.Helper()
	st, at, err := s.c.ConfigMaps(ctx, s.ns, rev)
	if err != nil {
		t.Fatal(err)
	}
	return st, at
}

// compact prepares the second phase: takes a continue token (one item per
// page), writes, compacts etcd at that write's revision (older ones are
// gone, the token's too), writes once more and restarts the cache node,
// whose window then begins after the compaction.
func (s *rvState) compact(ctx context.Context, t *testing.T) {
	l, err := s.cs.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || l.Continue == "" {
		t.Fatalf("first page of one: %v (continue %q)", err, l.Continue)
	}
	s.token = l.Continue
	s.tokenRev, _ = strconv.ParseInt(l.ResourceVersion, 10, 64)
	rev := s.create(ctx, t, "before-compaction", "1") // etcd keeps the revision it compacts at
	if rev <= s.tokenRev {
		t.Fatalf("the write after the token is at %d, the token at %d", rev, s.tokenRev)
	}
	if _, err := s.c.Etcd.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("cannot compact etcd: %v", err)
	}
	s.compactedAt = rev
	s.create(ctx, t, "after-compaction", "1")
	if err := s.c.StopNode(); err != nil {
		t.Fatal(err)
	}
	if err := s.c.StartNode(ctx); err != nil {
		t.Fatal(err)
	}
	// The node is back on its address: reads work at once.
	for i := 0; ; i++ {
		r := s.do(ctx, t, "a", nil)
		if r.code == http.StatusOK {
			break
		}
		if i == 0 {
			t.Errorf("the first GET after the cache node restarted on its address: %d %.300s", r.code, r.body)
		}
		if i == 20 {
			t.Fatalf("still %d after 20 GETs", r.code)
		}
	}
	starts := s.c.NodeStarts()
	s.windowFrom = starts[len(starts)-1].WindowFrom
	if s.windowFrom <= s.compactedAt {
		t.Fatalf("the restarted node's window begins at %d, not after the compaction at %d", s.windowFrom, s.compactedAt)
	}
	t.Logf("etcd compacted at %d; the cache node's window now begins at %d; continue token at %d", s.compactedAt, s.windowFrom, s.tokenRev)
}

// response is a raw HTTP answer.
type response struct {
	code   int
	header http.Header
	body   []byte
	took   time.Duration
}

// do sends GET path?query (path under /api/v1/namespaces/<ns>/configmaps)
// and reads the whole answer.
func (s *rvState) do(ctx context.Context, t *testing.T, name string, query url.Values) response {
	t.Helper()
	u := s.host + "/api/v1/namespaces/" + s.ns + "/configmaps"
	if name != "" {
		u += "/" + name
	}
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: body, took: time.Since(start)}
}

// status decodes r as a Status and checks its code and reason.
func (r response) status(t *testing.T, code int, reason metav1.StatusReason) *metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("answer %d is not a Status (%v): %.300s", r.code, err, r.body)
	}
	if r.code != code || int(st.Code) != code || st.Reason != reason {
		t.Fatalf("got %d (Status code %d, reason %q: %s), want %d %s", r.code, st.Code, st.Reason, st.Message, code, reason)
	}
	return &st
}

// list decodes r as a ConfigMapList.
func (r response) list(t *testing.T) (*corev1.ConfigMapList, map[string]*Object, int64) {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("got %d: %.300s", r.code, r.body)
	}
	var l corev1.ConfigMapList
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	st := map[string]*Object{}
	for i := range l.Items {
		o, err := ObjectOf(&l.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		st[o.Key()] = o
	}
	rev, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("list resourceVersion %q: %v", l.ResourceVersion, err)
	}
	return &l, st, rev
}

// object decodes r as a ConfigMap.
func (r response) object(t *testing.T) *Object {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("got %d: %.300s", r.code, r.body)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(r.body, &cm); err != nil {
		t.Fatal(err)
	}
	o, err := ObjectOf(&cm)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// watchEvents watches the namespace with opts and collects events until
// done says so (or 5s pass, or the stream ends).
func (s *rvState) watchEvents(ctx context.Context, t *testing.T, opts metav1.ListOptions, done func([]Event) bool) []Event {
	t.Helper()
	return s.watchFor(ctx, t, opts, done, 5*time.Second)
}

// watchFor is watchEvents for at most d.
func (s *rvState) watchFor(ctx context.Context, t *testing.T, opts metav1.ListOptions, done func([]Event) bool, d time.Duration) []Event {
	t.Helper()
	w, err := s.cs.CoreV1().ConfigMaps(s.ns).Watch(ctx, opts)
	if err != nil {
		t.Fatalf("watch %+v: %v", opts, err)
	}
	defer w.Stop()
	var evs []Event
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return evs
			}
			evs = append(evs, EventOf(ev))
			if done(evs) {
				return evs
			}
		case <-deadline:
			return evs
		}
	}
}

// untilBookmark stops at the first bookmark at or after rev.
func untilBookmark(rev int64) func([]Event) bool {
	return func(evs []Event) bool {
		e := evs[len(evs)-1]
		return e.Type == "ERROR" || e.Type == "BOOKMARK" && e.RV >= rev
	}
}

// untilAdded stops after n ADDED events.
func untilAdded(n int) func([]Event) bool {
	return func(evs []Event) bool {
		added := 0
		for _, e := range evs {
			if e.Type == "ADDED" {
				added++
			}
		}
		return added >= n || evs[len(evs)-1].Type == "ERROR"
	}
}

func sameStates(t *testing.T, what string, want, got map[string]*Object) {
	t.Helper()
	if diff := DiffStates(want, got); diff != "" {
		t.Errorf("%s: %s", what, diff)
	}
}

// Row "unset".

func rvGetConsistent(ctx context.Context, t *testing.T, s *rvState) {
	rev := s.update(ctx, t, "b", "get-consistent")
	if got := s.do(ctx, t, "b", nil).object(t); got.RV != rev {
		t.Errorf("GET right after the update at %d returned resourceVersion %d", rev, got.RV)
	}
}

func rvListConsistent(ctx context.Context, t *testing.T, s *rvState) {
	rev := s.create(ctx, t, "list-consistent", "1")
	_, got, at := s.do(ctx, t, "", nil).list(t)
	if at < rev || got[s.ns+"/list-consistent"] == nil {
		t.Fatalf("LIST right after the create at %d: resourceVersion %d, created object there: %v", rev, at, got[s.ns+"/list-consistent"] != nil)
	}
	want, _ := s.etcdState(ctx, t, at)
	sameStates(t, fmt.Sprintf("LIST at %d", at), want, got)
}

func rvWatchConsistent(ctx context.Context, t *testing.T, s *rvState) {
	rev := s.update(ctx, t, "c", "watch-consistent")
	want, _ := s.etcdState(ctx, t, rev)
	// No bookmark comes before something changes after the snapshot:
	// stop once the state's size of ADDED events came.
	evs := s.watchEvents(ctx, t, metav1.ListOptions{AllowWatchBookmarks: true}, untilAdded(len(want)))
	initial := map[string]*Object{}
	for _, e := range evs {
		if e.Type != "ADDED" {
			break
		}
		initial[e.Namespace+"/"+e.Name] = &Object{Namespace: e.Namespace, Name: e.Name, Labels: e.Labels, Data: e.Data, RV: e.RV}
	}
	if o := initial[s.ns+"/c"]; o == nil || o.RV != rev {
		t.Fatalf("initial events of a watch right after the update of c at %d: c is %+v; events %s", rev, o, around(evs, 0, 6))
	}
	sameStates(t, "initial events", want, initial)
}

// Row "0".

func rvGetAny(ctx context.Context, t *testing.T, s *rvState) {
	got := s.do(ctx, t, "a", q("resourceVersion", "0")).object(t)
	if got.RV < s.revA {
		t.Errorf("GET at resourceVersion 0: a at %d, older than its creation at %d", got.RV, s.revA)
	}
}

func rvListAny(ctx context.Context, t *testing.T, s *rvState) {
	_, got, at := s.do(ctx, t, "", q("resourceVersion", "0")).list(t)
	want, now := s.etcdState(ctx, t, at)
	if at > now || at < s.revC {
		t.Errorf("LIST at resourceVersion 0 answered at %d (setup ended at %d, etcd at %d)", at, s.revC, now)
	}
	sameStates(t, fmt.Sprintf("LIST at 0 (answered at %d)", at), want, got)
}

func rvWatchAny(ctx context.Context, t *testing.T, s *rvState) {
	want, _ := s.etcdState(ctx, t, 0)
	evs := s.watchEvents(ctx, t, metav1.ListOptions{ResourceVersion: "0", AllowWatchBookmarks: true}, untilAdded(len(want)))
	initial := map[string]*Object{}
	for _, e := range evs {
		if e.Type == "ADDED" {
			initial[e.Namespace+"/"+e.Name] = &Object{Namespace: e.Namespace, Name: e.Name, Labels: e.Labels, Data: e.Data, RV: e.RV}
		}
	}
	sameStates(t, "initial events of a watch from 0", want, initial)
}

// Row "N NotOlderThan, past".

func rvGetNotOlderPast(ctx context.Context, t *testing.T, s *rvState) {
	got := s.do(ctx, t, "a", q("resourceVersion", strconv.FormatInt(s.revA, 10))).object(t)
	if got.RV < s.revA2 {
		t.Errorf("GET a at resourceVersion %d: a at %d, want its latest version (%d or newer): not older than N is not Exact", s.revA, got.RV, s.revA2)
	}
}

func rvListNotOlderPast(ctx context.Context, t *testing.T, s *rvState) {
	for _, match := range []string{"", string(metav1.ResourceVersionMatchNotOlderThan)} {
		query := q("resourceVersion", strconv.FormatInt(s.revA, 10))
		if match != "" {
			query.Set("resourceVersionMatch", match)
		}
		_, got, at := s.do(ctx, t, "", query).list(t)
		if at < s.revC || got[s.ns+"/c"] == nil {
			t.Errorf("LIST at %d (match %q): answered at %d, c (created at %d) there: %v", s.revA, match, at, s.revC, got[s.ns+"/c"] != nil)
		}
		want, _ := s.etcdState(ctx, t, at)
		sameStates(t, fmt.Sprintf("LIST not older than %d (match %q), answered at %d", s.revA, match, at), want, got)
	}
}

// Row "N NotOlderThan, future".

const futureAhead = 1000

func (s *rvState) future(ctx context.Context, t *testing.T) string {
	_, now := s.etcdState(ctx, t, 0)
	return strconv.FormatInt(now+futureAhead, 10)
}

// checkTooLarge checks kube-apiserver's answer to a resourceVersion not
// reached: after waiting ~3s, 504 Timeout, a ResourceVersionTooLarge cause
// and Retry-After.
func checkTooLarge(t *testing.T, r response) {
	t.Helper()
	st := r.status(t, http.StatusGatewayTimeout, metav1.StatusReasonTimeout)
	if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
		t.Errorf("Status details %+v: want a cause of type %s", st.Details, metav1.CauseTypeResourceVersionTooLarge)
	}
	if st.Details == nil || st.Details.RetryAfterSeconds != 1 || r.header.Get("Retry-After") != "1" {
		t.Errorf("retry after: details %+v, header %q; want 1 and \"1\"", st.Details, r.header.Get("Retry-After"))
	}
	if r.took < 2500*time.Millisecond || r.took > 10*time.Second {
		t.Errorf("answered after %v: want a wait of about 3s first", r.took.Round(time.Millisecond))
	}
}

func rvGetFuture(ctx context.Context, t *testing.T, s *rvState) {
	checkTooLarge(t, s.do(ctx, t, "a", q("resourceVersion", s.future(ctx, t))))
}

func rvListFuture(ctx context.Context, t *testing.T, s *rvState) {
	// Several at once, without and with resourceVersionMatch: each
	// holds a connection from the gateway to the cache node while it
	// waits (the compacted phase restarts the node while they are
	// still pooled).
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			query := q("resourceVersion", s.future(ctx, t), "limit", strconv.Itoa(i))
			if i%2 == 0 {
				query.Set("resourceVersionMatch", "NotOlderThan")
			}
			checkTooLarge(t, s.do(ctx, t, "", query))
		})
	}
	wg.Wait()
}

func rvWatchFuture(ctx context.Context, t *testing.T, s *rvState) {
	// A WatchList not older than a future N: kgate's 504 comes before
	// the stream (kube-apiserver's as an ERROR event in it).
	checkTooLarge(t, s.do(ctx, t, "", q("watch", "true", "resourceVersion", s.future(ctx, t), "resourceVersionMatch", "NotOlderThan",
		"sendInitialEvents", "true", "allowWatchBookmarks", "true")))
	// A watch from a future N, as kube-apiserver: the stream opens, and
	// carries nothing (no event, no bookmark) before N.
	from := s.future(ctx, t)
	evs := s.watchFor(ctx, t, metav1.ListOptions{ResourceVersion: from, AllowWatchBookmarks: true}, func([]Event) bool { return false }, time.Second)
	if len(evs) > 0 {
		t.Errorf("watch from the future revision %s delivered %s", from, around(evs, 0, 3))
	}
}

// Row "N Exact".

func rvListExact(ctx context.Context, t *testing.T, s *rvState) {
	l, got, at := s.do(ctx, t, "", q("resourceVersion", strconv.FormatInt(s.revA, 10), "resourceVersionMatch", "Exact")).list(t)
	if at != s.revA || l.ResourceVersion != strconv.FormatInt(s.revA, 10) {
		t.Errorf("LIST Exact %d: metadata.resourceVersion %q", s.revA, l.ResourceVersion)
	}
	want := StateAt(s.hist.Writes(), s.revA) // a only: b and c came later
	if len(want) != 1 {
		t.Fatalf("the setup should leave one object at %d, not %d", s.revA, len(want))
	}
	sameStates(t, fmt.Sprintf("LIST Exact %d", s.revA), want, got)
}

func rvListExactCompacted(ctx context.Context, t *testing.T, s *rvState) {
	// Older than the window but not compacted: served from etcd.
	_, got, at := s.do(ctx, t, "", q("resourceVersion", strconv.FormatInt(s.compactedAt, 10), "resourceVersionMatch", "Exact")).list(t)
	if at != s.compactedAt {
		t.Errorf("LIST Exact %d (before the window at %d, after the compaction) answered at %d", s.compactedAt, s.windowFrom, at)
	}
	sameStates(t, fmt.Sprintf("LIST Exact %d", s.compactedAt), StateAt(s.hist.Writes(), s.compactedAt), got)
	// Older than both: 410.
	st := s.do(ctx, t, "", q("resourceVersion", strconv.FormatInt(s.revA, 10), "resourceVersionMatch", "Exact")).status(t, http.StatusGone, metav1.StatusReasonExpired)
	t.Logf("LIST Exact %d, compacted: 410 %s", s.revA, st.Message)
}

// Row "continue".

func rvContinue(ctx context.Context, t *testing.T, s *rvState) {
	first, got, rev := s.do(ctx, t, "", q("limit", "1")).list(t)
	if first.Continue == "" {
		t.Fatal("no continue token after one item")
	}
	s.create(ctx, t, "after-first-page", "1") // not in the snapshot
	token := first.Continue
	pages := 1
	for token != "" {
		l, page, at := s.do(ctx, t, "", q("continue", token, "limit", "1")).list(t)
		pages++
		if at != rev {
			t.Fatalf("page %d at resourceVersion %d, the first at %d", pages, at, rev)
		}
		maps.Copy(got, page)
		token = l.Continue
	}
	want, _ := s.etcdState(ctx, t, rev)
	sameStates(t, fmt.Sprintf("%d pages at %d", pages, rev), want, got)
}

func rvContinueExpired(ctx context.Context, t *testing.T, s *rvState) {
	r := s.do(ctx, t, "", q("continue", s.token, "limit", "100"))
	st := r.status(t, http.StatusGone, metav1.StatusReasonExpired)
	if st.ListMeta.Continue == "" || !strings.Contains(st.Message, "inconsistent") {
		t.Fatalf("410 of an expired continue (taken at %d): metadata.continue %q, message %q; want a fresh token and kube-apiserver's inconsistent-continue message", s.tokenRev, st.ListMeta.Continue, st.Message)
	}
	l, got, at := s.do(ctx, t, "", q("continue", st.ListMeta.Continue, "limit", "100")).list(t)
	_, now := s.etcdState(ctx, t, 0)
	if at < s.windowFrom || at > now {
		t.Errorf("the fresh token continued at %d, want the latest revision (%d)", at, now)
	}
	// It continues after the first page's key, at the latest state.
	want, _ := s.etcdState(ctx, t, at)
	names := slices.Sorted(maps.Keys(want))
	for _, k := range names[:1] {
		delete(want, k) // the first page had it
	}
	sameStates(t, fmt.Sprintf("the inconsistent continuation at %d", at), want, got)
	if l.Continue != "" {
		t.Errorf("the continuation has more pages: %q", l.Continue)
	}
}

// Row "watch from N".

func rvWatchFrom(ctx context.Context, t *testing.T, s *rvState) {
	_, now := s.etcdState(ctx, t, 0)
	evs := s.watchEvents(ctx, t, metav1.ListOptions{ResourceVersion: strconv.FormatInt(s.revA, 10), AllowWatchBookmarks: true}, untilBookmark(now))
	f, err := ParseFilter(s.ns, "", "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.Check(s.hist.Writes(), &Segment{Start: strconv.FormatInt(s.revA, 10), Events: evs, Complete: true})
	if err != nil {
		t.Fatalf("watch from %d: %v", s.revA, err)
	}
	if v.Through < now {
		t.Errorf("watch from %d: complete through %d, etcd at %d", s.revA, v.Through, now)
	}
}

func rvWatchTooOld(ctx context.Context, t *testing.T, s *rvState) {
	// client-go returns a watch only for a 200 answer: the 410 is an
	// ERROR event in the stream.
	evs := s.watchEvents(ctx, t, metav1.ListOptions{ResourceVersion: strconv.FormatInt(s.revA, 10)}, func(evs []Event) bool { return evs[len(evs)-1].Type == "ERROR" })
	if len(evs) != 1 || evs[0].Type != "ERROR" || evs[0].Code != http.StatusGone {
		t.Fatalf("watch from %d (window from %d): %s; want one ERROR event 410", s.revA, s.windowFrom, around(evs, 0, 3))
	}
	w, err := s.cs.CoreV1().ConfigMaps(s.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(s.revA, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) {
		t.Errorf("the ERROR event's Status is %v, want reason Expired", err)
	}
}

// Row "allowWatchBookmarks".

func rvBookmarks(ctx context.Context, t *testing.T, s *rvState) {
	// From a past revision: bookmarks carry revisions after it (as
	// kube-apiserver's, never the start revision itself).
	from := strconv.FormatInt(s.revA2, 10)
	w, err := s.cs.CoreV1().ConfigMaps(s.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: from, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	marks, last := 0, s.revA2+1
	deadline := time.After(2 * time.Second)
	for marks < 3 {
		select {
		case ev := <-w.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("unexpected %s", statusOf(ev))
			}
			if ev.Type != watch.Bookmark {
				continue
			}
			rv, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
			if rv < last || cm.Name != "" || len(cm.Data) > 0 {
				t.Fatalf("bookmark %+v: want only a resourceVersion, not below %d", cm, last)
			}
			last = rv
			marks++
		case <-deadline:
			t.Fatalf("%d bookmarks in 2s with a BookmarkInterval of 200ms", marks)
		}
	}
	// Without allowWatchBookmarks, none.
	evs := s.watchFor(ctx, t, metav1.ListOptions{ResourceVersion: from}, func([]Event) bool { return false }, 600*time.Millisecond)
	for _, e := range evs {
		if e.Type == "BOOKMARK" {
			t.Errorf("watch without allowWatchBookmarks delivered %s", &e)
		}
	}
}

// Row "sendInitialEvents".

func rvWatchList(ctx context.Context, t *testing.T, s *rvState) {
	last := s.update(ctx, t, "a", "watch-list")
	for _, rv := range []string{"", strconv.FormatInt(s.revA, 10)} {
		evs := s.watchEvents(ctx, t, metav1.ListOptions{
			ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			SendInitialEvents: ptr(true), AllowWatchBookmarks: true,
		}, func(evs []Event) bool { e := evs[len(evs)-1]; return e.Type == "ERROR" || e.InitialEnd })
		f, err := ParseFilter(s.ns, "", "")
		if err != nil {
			t.Fatal(err)
		}
		seg := &Segment{Start: "", WatchList: true, NotBefore: last, Events: evs, Complete: true}
		if rv != "" {
			seg.NotBefore, _ = strconv.ParseInt(rv, 10, 64)
		}
		v, err := f.Check(s.hist.Writes(), seg)
		switch {
		case err != nil:
			t.Errorf("WatchList (resourceVersion %q): %v", rv, err)
		case len(evs) == 0 || !evs[len(evs)-1].InitialEnd:
			t.Errorf("WatchList (resourceVersion %q): no initial-events-end bookmark: %s", rv, around(evs, len(evs)-1, 3))
		default:
			t.Logf("WatchList (resourceVersion %q): %d ADDED, then the initial-events-end bookmark at %d", rv, v.Initial, v.Snapshot)
		}
	}
}

// Row "bad combinations".

// checkInvalid checks a 422 Invalid on ListOptions with a cause on path.
func checkInvalid(t *testing.T, r response, path string) {
	t.Helper()
	st := r.status(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	if st.Details == nil || st.Details.Kind != "ListOptions" || st.Details.Group != "meta.k8s.io" {
		t.Errorf("details %+v: want kind ListOptions of meta.k8s.io", st.Details)
	}
	found := false
	for _, c := range st.Details.Causes {
		if c.Field == path {
			found = true
			if c.Type != metav1.CauseType(field.ErrorTypeForbidden) {
				t.Logf("cause on %s is %s (kube-apiserver: %s): %s", path, c.Type, metav1.CauseType(field.ErrorTypeForbidden), c.Message)
			}
		}
	}
	if !found {
		t.Errorf("causes %+v: none on %s", st.Details.Causes, path)
	}
}

func rvBadGet(ctx context.Context, t *testing.T, s *rvState) {
	s.do(ctx, t, "a", q("resourceVersion", "abc")).status(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
}

func rvBadList(ctx context.Context, t *testing.T, s *rvState) {
	checkInvalid(t, s.do(ctx, t, "", q("resourceVersionMatch", "NotOlderThan")), "resourceVersionMatch")
	checkInvalid(t, s.do(ctx, t, "", q("resourceVersionMatch", "Exact", "resourceVersion", "0")), "resourceVersionMatch")
	s.do(ctx, t, "", q("resourceVersion", "abc")).status(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
}

func rvBadWatch(ctx context.Context, t *testing.T, s *rvState) {
	checkInvalid(t, s.do(ctx, t, "", q("watch", "true", "sendInitialEvents", "true", "resourceVersionMatch", "NotOlderThan")), "allowWatchBookmarks")
	checkInvalid(t, s.do(ctx, t, "", q("watch", "true", "resourceVersionMatch", "NotOlderThan")), "resourceVersionMatch")
	s.do(ctx, t, "", q("watch", "true", "resourceVersion", "abc")).status(t, http.StatusBadRequest, metav1.StatusReasonBadRequest)
}
