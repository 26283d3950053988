package rest

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage"
)

// server serves e's handler on an in-memory listener, as the gateway
// does (errors become a Status): watches need a connection to hijack.
func (e *env) server() *fasthttputil.InmemoryListener {
	e.t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	e.serve(ln)
	return ln
}

// serve serves e's handler on ln until the test ends.
func (e *env) serve(ln net.Listener) {
	e.t.Helper()
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		var info requestinfo.Info
		if err := requestinfo.ParseBytes(&info, rc.Method(), rc.Path(), rc.QueryArgs()); err != nil {
			rc.SetStatusCode(404)
			return
		}
		res := e.resource(schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource})
		if err := e.h.Serve(rc, &info, res); err != nil {
			st := apierror.Status(err, res.GVR().GroupResource(), info.Name)
			b, _ := json.Marshal(st)
			rc.SetStatusCode(int(st.Code))
			rc.SetContentType("application/json")
			rc.SetBody(b)
		}
	}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	e.t.Cleanup(func() {
		ln.Close()
		<-done
	})
}

// watchClient is one watch request's response, read frame by frame.
type watchClient struct {
	t    testing.TB
	conn net.Conn
	resp *http.Response
	dec  *json.Decoder
}

func (e *env) watch(ln *fasthttputil.InmemoryListener, uri string) *watchClient {
	e.t.Helper()
	return e.watchAs(ln, uri, "application/json")
}

func (e *env) watchAs(ln *fasthttputil.InmemoryListener, uri, accept string) *watchClient {
	e.t.Helper()
	conn, err := ln.Dial()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: kgate\r\nAccept: %s\r\n\r\n", uri, accept); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &watchClient{t: e.t, conn: conn, resp: resp, dec: json.NewDecoder(resp.Body)}
}

// frame is one watch event: its type and the object's name,
// resourceVersion and annotations (or the Status of an ERROR).
type frame struct {
	Type   string
	Object json.RawMessage
}

func (w *watchClient) next() (string, metav1.ObjectMeta, *metav1.Status) {
	w.t.Helper()
	var f frame
	if err := w.dec.Decode(&f); err != nil {
		w.t.Fatalf("cannot read a watch frame: %v", err)
	}
	if f.Type == "ERROR" {
		var st metav1.Status
		if err := json.Unmarshal(f.Object, &st); err != nil {
			w.t.Fatal(err)
		}
		return f.Type, metav1.ObjectMeta{}, &st
	}
	var p corev1.Pod
	if err := json.Unmarshal(f.Object, &p); err != nil {
		w.t.Fatal(err)
	}
	if p.Kind != "Pod" || p.APIVersion != "v1" {
		w.t.Errorf("%s object is %s %s", f.Type, p.APIVersion, p.Kind)
	}
	return f.Type, p.ObjectMeta, nil
}

// ended checks the stream is over.
func (w *watchClient) ended() {
	w.t.Helper()
	var f frame
	if err := w.dec.Decode(&f); err != io.EOF {
		w.t.Errorf("after the last frame: %v, %+v", err, f)
	}
}

func delivery(t *testing.T, e *env, typ watchhub.Type, p *corev1.Pod, rev int64) watchhub.Delivery {
	t.Helper()
	p = p.DeepCopy()
	p.ResourceVersion = fmt.Sprint(rev)
	b, err := e.w.codec.EncodeJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	return watchhub.Delivery{Type: typ, Rev: rev, Event: &watchhub.Shared{Event: event.Event{
		Revision: rev, Key: "/registry/pods/" + p.Namespace + "/" + p.Name, Namespace: p.Namespace, Name: p.Name, Object: b,
	}}}
}

func TestWatchFromRevision(t *testing.T) {
	e := newEnv(t)
	w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=5&labelSelector=app%3Dweb")
	if w.resp.StatusCode != 200 || w.resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("response %d %q", w.resp.StatusCode, w.resp.Header.Get("Content-Type"))
	}
	s := <-e.hub.started
	// The namespace "ns" lies in the second pods range (split at "n").
	if s.since != 5 || !slices.Equal(s.ids, []string{"pods-1"}) || s.filter.Namespace != "ns" || s.filter.Labels.String() != "app=web" {
		t.Errorf("hub watch since %d ranges %v filter %+v", s.since, s.ids, s.filter)
	}
	if len(e.cache.lists) != 0 || e.revs.calls != 0 {
		t.Error("a watch from a revision read the cache")
	}
	p := pod("ns", "p", map[string]string{"app": "web"})
	for i, typ := range []watchhub.Type{watchhub.Added, watchhub.Modified, watchhub.Deleted} {
		s.in <- delivery(t, e, typ, p, int64(6+i))
		got, m, _ := w.next()
		if got != typ.String() || m.Name != "p" || m.ResourceVersion != fmt.Sprint(6+i) {
			t.Errorf("frame %s %s@%s, want %s p@%d", got, m.Name, m.ResourceVersion, typ, 6+i)
		}
	}
	// The window no longer has what the watch needs: 410 in an ERROR
	// event, and the stream ends.
	s.in <- fmt.Errorf("cannot catch up: %w", storage.ErrCompacted)
	typ, _, st := w.next()
	if typ != "ERROR" || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Errorf("frame %s %+v, want ERROR 410 Expired", typ, st)
	}
	w.ended()
	<-s.closed
}

func TestWatchAllNamespacesMergesRanges(t *testing.T) {
	e := newEnv(t)
	w := e.watch(e.server(), "/api/v1/pods?watch=1&resourceVersion=5")
	s := <-e.hub.started
	if !slices.Equal(s.ids, []string{"pods-0", "pods-1"}) || s.filter.Namespace != "" {
		t.Errorf("ranges %v filter %+v", s.ids, s.filter)
	}
	// The client going away ends the watch.
	w.conn.Close()
	<-s.closed
}

func TestWatchOneObject(t *testing.T) {
	e := newEnv(t)
	e.watch(e.server(), "/api/v1/watch/namespaces/ns/pods/p?resourceVersion=5")
	s := <-e.hub.started
	if got := s.filter.Fields.String(); got != "metadata.name=p" {
		t.Errorf("field filter %q", got)
	}
}

// TestWatchInitialEvents: without a resourceVersion (or with "0") the
// watch starts with the current state as ADDED events, read from the
// cache at one revision, then follows from that revision.
func TestWatchInitialEvents(t *testing.T) {
	for _, tc := range []struct {
		query    string
		wantRead string
	}{
		{"", "102 NotOlderThan"},
		{"&resourceVersion=0", "0 "},
	} {
		t.Run(tc.query, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.ListPageSize = 1 })
			e.seed(podsGVR, pod("ns", "a", nil), pod("ns", "b", nil))
			w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1"+tc.query)
			for _, name := range []string{"a", "b"} {
				typ, m, _ := w.next()
				if typ != "ADDED" || m.Name != name {
					t.Errorf("initial %s %s, want ADDED %s", typ, m.Name, name)
				}
			}
			s := <-e.hub.started
			if s.since != 102 {
				t.Errorf("follows from %d, want the list's revision 102", s.since)
			}
			first := e.cache.lists[0].opts.Read
			if got := fmt.Sprintf("%d %s", first.ResourceVersion, first.Match); got != tc.wantRead {
				t.Errorf("first read %s, want %s", got, tc.wantRead)
			}
			// Pages after the first are at its revision.
			if r := e.cache.lists[1].opts.Read; r.Match != "Exact" || r.ResourceVersion != 102 {
				t.Errorf("second page read %+v", r)
			}
			s.in <- delivery(t, e, watchhub.Added, pod("ns", "c", nil), 103)
			if typ, m, _ := w.next(); typ != "ADDED" || m.Name != "c" {
				t.Errorf("then %s %s", typ, m.Name)
			}
		})
	}
}

// TestWatchList: sendInitialEvents ends the initial events with a
// bookmark annotated k8s.io/initial-events-end.
func TestWatchList(t *testing.T) {
	e := newEnv(t)
	e.seed(podsGVR, pod("ns", "a", nil))
	w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
	if typ, m, _ := w.next(); typ != "ADDED" || m.Name != "a" {
		t.Errorf("initial %s %s", typ, m.Name)
	}
	typ, m, _ := w.next()
	if typ != "BOOKMARK" || m.Annotations[initialEventsEnd] != "true" || m.ResourceVersion != "101" {
		t.Errorf("then %s rv %s annotations %v, want the initial-events-end bookmark at 101", typ, m.ResourceVersion, m.Annotations)
	}
}

// TestWatchBookmarks: a watch that asked for bookmarks gets them once the
// range moved past where it started (never one at a revision it has not
// reached).
func TestWatchBookmarks(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BookmarkInterval = 1 })
	w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=5&allowWatchBookmarks=true")
	s := <-e.hub.started
	s.setLast(9)
	typ, m, _ := w.next()
	if typ != "BOOKMARK" || m.ResourceVersion != "9" || m.Name != "" {
		t.Errorf("got %s %q rv %s, want a BOOKMARK at 9", typ, m.Name, m.ResourceVersion)
	}
}

func TestWatchErrors(t *testing.T) {
	t.Run("bad options are an ordinary response", func(t *testing.T) {
		e := newEnv(t)
		w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1&sendInitialEvents=true")
		if w.resp.StatusCode != 422 {
			t.Errorf("status %d, want 422", w.resp.StatusCode)
		}
	})
	t.Run("the hub cannot start", func(t *testing.T) {
		e := newEnv(t)
		e.hub.err = fmt.Errorf("cannot watch: %w", storage.ErrCompacted)
		w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=1")
		if typ, _, st := w.next(); typ != "ERROR" || st.Code != 410 {
			t.Errorf("got %s %+v, want ERROR 410", typ, st)
		}
		w.ended()
	})
	t.Run("initial list fails before the stream", func(t *testing.T) {
		e := newEnv(t)
		e.cache.listErr = []error{fmt.Errorf("cannot list: %w", storage.ErrUnavailable)}
		w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1")
		if w.resp.StatusCode != 503 {
			t.Errorf("status %d, want 503", w.resp.StatusCode)
		}
	})
	t.Run("shutting down", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		e := newEnv(t)
		var err error
		if e.h, err = New(ctx, e.h.cfg); err != nil {
			t.Fatal(err)
		}
		cancel()
		w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=1")
		var st metav1.Status
		if err := json.NewDecoder(w.resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		if w.resp.StatusCode != 429 || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
			t.Errorf("status %d %+v, want 429 retrying after 1s", w.resp.StatusCode, st)
		}
		if !w.resp.Close {
			t.Error("the connection is kept: the client would not move to another gateway")
		}
		if len(e.hub.watches) != 0 {
			t.Error("a watch started while shutting down")
		}
	})
}

// TestWatchProtobuf: kube-apiserver's protobuf watch framing: a 4-byte
// length, a WatchEvent whose object is an enveloped Pod.
func TestWatchProtobuf(t *testing.T) {
	e := newEnv(t)
	e.seed(podsGVR, pod("ns", "a", map[string]string{"app": "web"}))
	w := e.watchAs(e.server(), "/api/v1/namespaces/ns/pods?watch=1", "application/vnd.kubernetes.protobuf;stream=watch")
	if ct := w.resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf;stream=watch" {
		t.Errorf("content type %q", ct)
	}
	s := <-e.hub.started
	s.in <- delivery(t, e, watchhub.Modified, pod("ns", "a", map[string]string{"app": "db"}), 200)
	for _, want := range []struct{ typ, app, rv string }{{"ADDED", "web", "101"}, {"MODIFIED", "db", "200"}} {
		var size [4]byte
		if _, err := io.ReadFull(w.resp.Body, size[:]); err != nil {
			t.Fatal(err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(w.resp.Body, frame); err != nil {
			t.Fatal(err)
		}
		var ev metav1.WatchEvent
		if err := ev.Unmarshal(frame); err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		unwrapProtobuf(t, ev.Object.Raw, "Pod", &p)
		if ev.Type != want.typ || p.Name != "a" || p.Labels["app"] != want.app || p.ResourceVersion != want.rv {
			t.Errorf("frame %s %s app=%s rv %s, want %+v", ev.Type, p.Name, p.Labels["app"], p.ResourceVersion, want)
		}
	}
}
