package rest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/storage"
)

// TestGetResourceVersion: how a GET's resourceVersion becomes the cache
// node read, as kube-apiserver's table: unset is consistent (etcd's
// current revision, then the cache at it), "0" any, N not older than N.
func TestGetResourceVersion(t *testing.T) {
	for _, tc := range []struct {
		query        string
		wantRead     client.Read
		wantRevAsked bool
		wantCode     int
	}{
		{"", client.Read{ResourceVersion: 101, Match: "NotOlderThan"}, true, 200},
		{"?resourceVersion=0", client.Read{}, false, 200},
		{"?resourceVersion=50", client.Read{ResourceVersion: 50, Match: "NotOlderThan"}, false, 200},
		{"?resourceVersion=abc", client.Read{}, false, 400},
		{"?resourceVersion=-1", client.Read{}, false, 400},
	} {
		t.Run(tc.query, func(t *testing.T) {
			e := newEnv(t)
			e.seed(podsGVR, pod("ns", "p", nil))
			r := e.do("GET", "/api/v1/namespaces/ns/pods/p"+tc.query, nil)
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d (%v)", r.code, tc.wantCode, r.status)
			}
			if (e.revs.calls > 0) != tc.wantRevAsked {
				t.Errorf("revision asked %d times, want asked %v", e.revs.calls, tc.wantRevAsked)
			}
			if tc.wantCode != 200 {
				if len(e.cache.gets) != 0 {
					t.Error("a bad request read the cache")
				}
				return
			}
			if len(e.cache.gets) != 1 || e.cache.gets[0] != tc.wantRead {
				t.Errorf("cache reads %+v, want %+v", e.cache.gets, tc.wantRead)
			}
			var got corev1.Pod
			r.decode(t, &got)
			if got.Name != "p" || got.ResourceVersion != "101" || got.Kind != "Pod" {
				t.Errorf("got %s/%s rv %s", got.Kind, got.Name, got.ResourceVersion)
			}
			if e.store.called("get") {
				t.Error("a GET read etcd")
			}
		})
	}
}

// TestGetLaggingCache: a consistent read the cache cannot reach in time is
// refused with 429 by default, or read from etcd; a read at a given
// revision gets the 504 "too large resource version".
func TestGetLaggingCache(t *testing.T) {
	tooLarge := fmt.Errorf("cannot read: %w", storage.ErrRevisionTooLarge)
	t.Run("reject", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, pod("ns", "p", nil))
		e.cache.getErr = tooLarge
		r := e.do("GET", "/api/v1/namespaces/ns/pods/p", nil)
		if r.code != http.StatusTooManyRequests || r.status.Details == nil || r.status.Details.RetryAfterSeconds != 1 {
			t.Errorf("got %d %+v, want 429 with Retry-After 1", r.code, r.status)
		}
		if e.store.called("get") {
			t.Error("rejected read went to etcd")
		}
	})
	t.Run("etcd", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ConsistentReadFallback = FallbackEtcd })
		e.seed(podsGVR, pod("ns", "p", nil))
		e.cache.getErr = tooLarge
		r := e.do("GET", "/api/v1/namespaces/ns/pods/p", nil)
		var got corev1.Pod
		r.decode(t, &got)
		if got.Name != "p" || !e.store.called("get") || e.store.lastGet != 0 {
			t.Errorf("fallback read %v (etcd asked %v at %d)", got.Name, e.store.called("get"), e.store.lastGet)
		}
	})
	t.Run("explicit revision", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ConsistentReadFallback = FallbackEtcd })
		e.seed(podsGVR, pod("ns", "p", nil))
		e.cache.getErr = tooLarge
		r := e.do("GET", "/api/v1/namespaces/ns/pods/p?resourceVersion=500", nil)
		if r.code != http.StatusGatewayTimeout || r.reason() != metav1.StatusReasonTimeout {
			t.Fatalf("got %d %s, want 504 Timeout", r.code, r.reason())
		}
		if c := r.status.Details.Causes; len(c) != 1 || c[0].Type != metav1.CauseTypeResourceVersionTooLarge {
			t.Errorf("causes %+v", c)
		}
		if e.store.called("get") {
			t.Error("a read at a given revision went to etcd")
		}
	})
	t.Run("fallback is a write-path storage error", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.ConsistentReadFallback = FallbackEtcd })
		e.cache.getErr = tooLarge
		r := e.do("GET", "/api/v1/namespaces/ns/pods/gone", nil)
		if r.code != 404 || r.status.Details.Name != "gone" {
			t.Errorf("got %d %+v", r.code, r.status)
		}
	})
}

// TestErrorStatus: each error a read can meet becomes the Status
// kube-apiserver answers with.
func TestErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		reason metav1.StatusReason
	}{
		{storage.ErrNotFound, 404, metav1.StatusReasonNotFound},
		{storage.ErrCompacted, 410, metav1.StatusReasonExpired},
		{storage.ErrRevisionTooLarge, 504, metav1.StatusReasonTimeout},
		{storage.ErrUnavailable, 503, metav1.StatusReasonServiceUnavailable},
		{storage.ErrConflict, 409, metav1.StatusReasonConflict},
		{storage.ErrAlreadyExists, 409, metav1.StatusReasonAlreadyExists},
		{storage.ErrInvalidObject, 500, metav1.StatusReasonInternalError},
		{context.DeadlineExceeded, 504, metav1.StatusReasonTimeout},
		{errors.New("boom"), 500, metav1.StatusReasonInternalError},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			e := newEnv(t)
			e.cache.getErr = fmt.Errorf("cannot read: %w", tc.err)
			r := e.do("GET", "/api/v1/namespaces/ns/pods/p?resourceVersion=5", nil)
			if r.code != tc.code || r.reason() != tc.reason {
				t.Errorf("got %d %s, want %d %s", r.code, r.reason(), tc.code, tc.reason)
			}
			if r.status.Details != nil && r.status.Details.Name != "" && r.status.Details.Name != "p" {
				t.Errorf("details name %q", r.status.Details.Name)
			}
		})
	}
	t.Run("revision oracle down", func(t *testing.T) {
		e := newEnv(t)
		e.revs.err = fmt.Errorf("cannot learn: %w", storage.ErrUnavailable)
		r := e.do("GET", "/api/v1/namespaces/ns/pods/p", nil)
		if r.code != 503 {
			t.Errorf("got %d, want 503", r.code)
		}
		if len(e.cache.gets) != 0 {
			t.Error("read the cache without a revision")
		}
	})
}

func TestListResourceVersion(t *testing.T) {
	for _, tc := range []struct {
		query    string
		wantRead client.Read
		wantCode int
	}{
		{"", client.Read{ResourceVersion: 102, Match: "NotOlderThan"}, 200},
		{"?resourceVersion=0", client.Read{}, 200},
		{"?resourceVersion=7", client.Read{ResourceVersion: 7, Match: "NotOlderThan"}, 200},
		{"?resourceVersion=7&resourceVersionMatch=NotOlderThan", client.Read{ResourceVersion: 7, Match: "NotOlderThan"}, 200},
		{"?resourceVersion=102&resourceVersionMatch=Exact", client.Read{ResourceVersion: 102, Match: "Exact"}, 200},
		{"?resourceVersionMatch=Exact", client.Read{}, 422},
		{"?resourceVersion=0&resourceVersionMatch=Exact", client.Read{}, 422},
	} {
		t.Run(tc.query, func(t *testing.T) {
			e := newEnv(t)
			e.seed(podsGVR, pod("ns", "a", nil), pod("ns", "b", nil))
			r := e.do("GET", "/api/v1/namespaces/ns/pods"+tc.query, nil)
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d (%v)", r.code, tc.wantCode, r.status)
			}
			if tc.wantCode != 200 {
				return
			}
			// A namespace lies in one range: one read.
			if len(e.cache.lists) != 1 || e.cache.lists[0].opts.Read != tc.wantRead {
				t.Fatalf("cache lists %+v, want one at %+v", e.cache.lists, tc.wantRead)
			}
			if p := e.cache.lists[0].opts.Prefix; p != "/registry/pods/ns/" {
				t.Errorf("prefix %q", p)
			}
			var l corev1.PodList
			r.decode(t, &l)
			if len(l.Items) != 2 || l.Kind != "PodList" || l.ResourceVersion == "" {
				t.Errorf("list %s rv %q with %d items", l.Kind, l.ResourceVersion, len(l.Items))
			}
		})
	}
}

// TestListPages: limit and continue. Every page is read at the first
// page's revision (Exact), across ranges, and the token is
// kube-apiserver's.
func TestListPages(t *testing.T) {
	e := newEnv(t)
	// Pods are split at "n": a-m namespaces in pods-0, the rest in pods-1.
	e.seed(podsGVR, pod("a", "1", nil), pod("b", "2", nil), pod("x", "3", nil), pod("y", "4", nil), pod("z", "5", nil))
	var names []string
	cont := ""
	var revs []string
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("too many pages")
		}
		q := "?limit=2"
		if cont != "" {
			q += "&continue=" + cont
		}
		// A write between pages must not show in later pages.
		if page == 1 {
			e.seed(podsGVR, pod("c", "new", nil))
		}
		r := e.do("GET", "/api/v1/pods"+q, nil)
		var l corev1.PodList
		r.decode(t, &l)
		for _, p := range l.Items {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		revs = append(revs, l.ResourceVersion)
		if l.Continue == "" {
			if l.RemainingItemCount != nil {
				t.Errorf("last page has remainingItemCount %d", *l.RemainingItemCount)
			}
			break
		}
		tok, err := decodeContinue(l.Continue, e.resource(podsGVR))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(tok.ResourceVersion) != revs[0] {
			t.Errorf("page %d token at %d, want the first page's revision %s", page, tok.ResourceVersion, revs[0])
		}
		cont = l.Continue
	}
	// "c/new" was written after the first page: not in the snapshot.
	for i, c := range e.cache.lists {
		if i == 0 {
			continue
		}
		if c.opts.Read.Match != "Exact" || fmt.Sprint(c.opts.Read.ResourceVersion) != revs[0] {
			t.Errorf("read %d: %+v, want Exact at %s", i, c.opts.Read, revs[0])
		}
	}
	for _, r := range revs {
		if r != revs[0] {
			t.Errorf("pages at revisions %v", revs)
			break
		}
	}
	want := "a/1 b/2 x/3 y/4 z/5"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("pages gave %s, want %s", got, want)
	}
	// The ranges were each asked within the namespaces they hold.
	asked := map[string]bool{}
	for _, c := range e.cache.lists {
		asked[c.rangeID] = true
	}
	if !asked["pods-0"] || !asked["pods-1"] {
		t.Errorf("ranges asked %v", asked)
	}
}

func TestListRemainingCount(t *testing.T) {
	e := newEnv(t)
	e.seed(podsGVR, pod("x", "1", nil), pod("x", "2", nil), pod("x", "3", nil))
	var l corev1.PodList
	e.do("GET", "/api/v1/namespaces/x/pods?limit=1", nil).decode(t, &l)
	if l.Continue == "" || l.RemainingItemCount == nil || *l.RemainingItemCount != 2 {
		t.Errorf("continue %q remaining %v", l.Continue, l.RemainingItemCount)
	}
	// With a selector the count is unknown.
	l = corev1.PodList{}
	e.do("GET", "/api/v1/namespaces/x/pods?limit=1&labelSelector=a%21%3Db", nil).decode(t, &l)
	if l.RemainingItemCount != nil {
		t.Errorf("remaining %d with a selector", *l.RemainingItemCount)
	}
}

func TestListSelectors(t *testing.T) {
	e := newEnv(t)
	e.seed(podsGVR, pod("ns", "a", nil))
	r := e.do("GET", "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&fieldSelector=spec.nodeName%3Dn1", nil)
	if r.code != 200 {
		t.Fatalf("code %d: %v", r.code, r.status)
	}
	if o := e.cache.lists[0].opts; o.Label != "app=web" || o.Field != "spec.nodeName=n1" {
		t.Errorf("selectors passed to the cache: %q %q", o.Label, o.Field)
	}
	for _, q := range []string{
		"fieldSelector=spec.unknown%3Dx",
		"labelSelector=a%3D%3D%3Db",
		"fieldSelector=metadata.name%3E3",
	} {
		r := e.do("GET", "/api/v1/namespaces/ns/pods?"+q, nil)
		if r.code != 400 || r.reason() != metav1.StatusReasonBadRequest {
			t.Errorf("%s: %d %s, want 400 BadRequest", q, r.code, r.reason())
		}
	}
	// The cache node refusing a selector is the client's bad request too.
	e.cache.listErr = []error{fmt.Errorf("bad selector: %w", client.ErrBadRequest)}
	if r := e.do("GET", "/api/v1/namespaces/ns/pods?labelSelector=a", nil); r.code != 400 {
		t.Errorf("cache bad request: %d", r.code)
	}
}

// TestListCompacted: a snapshot the cache no longer has is read from
// etcd; a continue token etcd no longer has is a 410 with a fresh token.
func TestListCompacted(t *testing.T) {
	compacted := fmt.Errorf("cannot list: %w", storage.ErrCompacted)
	t.Run("exact from etcd", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, pod("ns", "a", map[string]string{"app": "web"}), pod("ns", "b", nil))
		e.cache.listErr = []error{compacted}
		var l corev1.PodList
		e.do("GET", "/api/v1/namespaces/ns/pods?resourceVersion=101&resourceVersionMatch=Exact&labelSelector=app%3Dweb", nil).decode(t, &l)
		if len(e.store.lastList) != 1 || e.store.lastList[0].Revision != 101 {
			t.Fatalf("etcd lists %+v, want one at 101", e.store.lastList)
		}
		// Selectors are applied to what etcd returns.
		if len(l.Items) != 1 || l.Items[0].Name != "a" || l.ResourceVersion != "101" {
			t.Errorf("items %d rv %s", len(l.Items), l.ResourceVersion)
		}
	})
	t.Run("not older than is not retried", func(t *testing.T) {
		e := newEnv(t)
		e.cache.listErr = []error{compacted}
		if r := e.do("GET", "/api/v1/namespaces/ns/pods?resourceVersion=5", nil); r.code != 410 || r.reason() != metav1.StatusReasonExpired {
			t.Errorf("got %d %s, want 410 Expired", r.code, r.reason())
		}
	})
	t.Run("continue expired", func(t *testing.T) {
		e := newEnv(t)
		e.seed(podsGVR, pod("ns", "a", nil), pod("ns", "b", nil))
		tok, err := encodeContinue(e.resource(podsGVR), "/registry/pods/ns/a", 50)
		if err != nil {
			t.Fatal(err)
		}
		e.cache.listErr = []error{compacted}
		e.store.listErr = []error{compacted}
		r := e.do("GET", "/api/v1/namespaces/ns/pods?limit=1&continue="+tok, nil)
		if r.code != 410 || r.reason() != metav1.StatusReasonExpired || r.status.Continue == "" {
			t.Fatalf("got %d %s continue %q, want 410 Expired with a fresh token", r.code, r.reason(), r.status.Continue)
		}
		// The fresh token continues after the same key at the latest state.
		var l corev1.PodList
		e.do("GET", "/api/v1/namespaces/ns/pods?continue="+r.status.Continue, nil).decode(t, &l)
		if len(l.Items) != 1 || l.Items[0].Name != "b" {
			t.Errorf("fresh token listed %d items", len(l.Items))
		}
		last := e.cache.lists[len(e.cache.lists)-1].opts
		if last.Match != "NotOlderThan" || last.Continue != "/registry/pods/ns/a" {
			t.Errorf("fresh token read %+v", last)
		}
	})
}

// TestContentNegotiation: JSON, YAML, protobuf, tables and metadata, for
// GET and LIST.
func TestContentNegotiation(t *testing.T) {
	e := newEnv(t)
	e.seed(podsGVR, pod("ns", "p", map[string]string{"app": "web"}))
	for _, tc := range []struct {
		accept    string
		path      string
		wantType  string
		wantCache client.Format
		check     func(t *testing.T, body []byte)
	}{
		{"", "pods/p", "application/json", client.JSON, func(t *testing.T, b []byte) {
			if !bytes.HasPrefix(b, []byte(`{"kind":"Pod"`)) {
				t.Errorf("body %.40s", b)
			}
		}},
		{"application/yaml", "pods/p", "application/yaml", client.JSON, func(t *testing.T, b []byte) {
			var p corev1.Pod
			if err := yaml.Unmarshal(b, &p); err != nil || p.Name != "p" || !bytes.Contains(b, []byte("kind: Pod\n")) {
				t.Errorf("yaml %s: %v", b, err)
			}
		}},
		{"application/vnd.kubernetes.protobuf", "pods/p", "application/vnd.kubernetes.protobuf", client.Protobuf, func(t *testing.T, b []byte) {
			p := &corev1.Pod{}
			unwrapProtobuf(t, b, "Pod", p)
			if p.Name != "p" || p.Labels["app"] != "web" {
				t.Errorf("protobuf pod %+v", p.ObjectMeta)
			}
		}},
		{"application/vnd.kubernetes.protobuf", "pods", "application/vnd.kubernetes.protobuf", client.Protobuf, func(t *testing.T, b []byte) {
			l := &corev1.PodList{}
			unwrapProtobuf(t, b, "PodList", l)
			if len(l.Items) != 1 || l.Items[0].Name != "p" {
				t.Errorf("protobuf list %+v", l)
			}
		}},
		{"application/json;as=Table;v=v1;g=meta.k8s.io", "pods", "application/json", client.JSON, func(t *testing.T, b []byte) {
			var tbl metav1.Table
			if err := jsonUnmarshal(b, &tbl); err != nil || tbl.Kind != "Table" || len(tbl.Rows) != 1 || len(tbl.ColumnDefinitions) == 0 {
				t.Errorf("table %s: %v", b, err)
			}
			if tbl.Rows[0].Cells[0] != "p" {
				t.Errorf("first cell %v", tbl.Rows[0].Cells[0])
			}
		}},
		{"application/json;as=Table;v=v1;g=meta.k8s.io", "pods/p", "application/json", client.JSON, func(t *testing.T, b []byte) {
			var tbl metav1.Table
			if err := jsonUnmarshal(b, &tbl); err != nil || len(tbl.Rows) != 1 || tbl.ResourceVersion != "101" {
				t.Errorf("table %s: %v", b, err)
			}
		}},
		// Old kubectl asks for v1beta1: the table and its rows' metadata
		// in that version, as upstream's asTable.
		{"application/json;as=Table;v=v1beta1;g=meta.k8s.io", "pods", "application/json", client.JSON, func(t *testing.T, b []byte) {
			var tbl struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Rows       []struct {
					Object struct {
						APIVersion string `json:"apiVersion"`
						Kind       string `json:"kind"`
					} `json:"object"`
				} `json:"rows"`
			}
			if err := jsonUnmarshal(b, &tbl); err != nil || tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1beta1" || len(tbl.Rows) != 1 {
				t.Fatalf("table %s: %v", b, err)
			}
			if o := tbl.Rows[0].Object; o.APIVersion != "meta.k8s.io/v1beta1" || o.Kind != "PartialObjectMetadata" {
				t.Errorf("row object %s %s, want meta.k8s.io/v1beta1 PartialObjectMetadata", o.APIVersion, o.Kind)
			}
		}},
		{"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "pods", "application/json", client.JSON, func(t *testing.T, b []byte) {
			var l metav1.PartialObjectMetadataList
			if err := jsonUnmarshal(b, &l); err != nil || l.Kind != "PartialObjectMetadataList" || len(l.Items) != 1 || l.Items[0].Labels["app"] != "web" {
				t.Errorf("metadata list %s: %v", b, err)
			}
			if bytes.Contains(b, []byte(`"spec"`)) {
				t.Error("metadata carries the spec")
			}
		}},
	} {
		t.Run(tc.accept+" "+tc.path, func(t *testing.T) {
			before := len(e.cache.formats) + len(e.cache.lists)
			r := e.do("GET", "/api/v1/namespaces/ns/"+tc.path, nil, "Accept", tc.accept)
			if r.code != 200 {
				t.Fatalf("code %d: %v", r.code, r.status)
			}
			if !strings.HasPrefix(r.ctype, tc.wantType) {
				t.Errorf("content type %q, want %q", r.ctype, tc.wantType)
			}
			if len(e.cache.formats)+len(e.cache.lists) != before+1 {
				t.Fatal("not one cache read")
			}
			var f client.Format
			if strings.Contains(tc.path, "/") {
				f = e.cache.formats[len(e.cache.formats)-1]
			} else {
				f = e.cache.lists[len(e.cache.lists)-1].opts.Format
			}
			if f != tc.wantCache {
				t.Errorf("cache format %v, want %v", f, tc.wantCache)
			}
			tc.check(t, r.body)
		})
	}
	if r := e.do("GET", "/api/v1/namespaces/ns/pods/p", nil, "Accept", "text/html"); r.code != http.StatusNotAcceptable {
		t.Errorf("text/html: %d, want 406", r.code)
	}
	if r := e.do("GET", "/api/v1/namespaces/ns/pods/p", nil, "Accept", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"); r.code != http.StatusNotAcceptable {
		t.Errorf("a metadata list of one object: %d, want 406", r.code)
	}
}

// unwrapProtobuf checks kube-apiserver's protobuf envelope and decodes
// its raw message.
func unwrapProtobuf(t *testing.T, b []byte, kind string, into interface{ Unmarshal([]byte) error }) {
	t.Helper()
	raw, ok := bytes.CutPrefix(b, []byte("k8s\x00"))
	if !ok {
		t.Fatalf("no protobuf magic: %q", b[:min(len(b), 8)])
	}
	var u runtime.Unknown
	if err := u.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	if u.Kind != kind || u.APIVersion != "v1" {
		t.Errorf("envelope %s %s, want v1 %s", u.APIVersion, u.Kind, kind)
	}
	if err := into.Unmarshal(u.Raw); err != nil {
		t.Fatal(err)
	}
}
