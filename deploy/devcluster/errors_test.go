package devcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kgate/kgate/deploy/devcluster"
)

// badInput is a namespace holding one ConfigMap "cm" and a raw client
// to send it requests the API must reject.
type badInput struct {
	c  *devcluster.Cluster
	rc *rawClient
	ns string
	cm *corev1.ConfigMap // as created
}

func newBadInput(t *testing.T) *badInput {
	t.Helper()
	c := cluster(t)
	cs := clientset(t, c, true, nil)
	b := &badInput{c: c, rc: newRawClient(t, c), ns: uniqueNS("bad")}
	ensureNamespace(t, cs, b.ns)
	var err error
	b.cm, err = cs.CoreV1().ConfigMaps(b.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{"app": "x"}}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot create cm: %v", err)
	}
	return b
}

func (b *badInput) cmPath(name string) string {
	p := "/api/v1/namespaces/" + b.ns + "/configmaps"
	if name != "" {
		p += "/" + name
	}
	return p
}

// want is the rejection a request must get.
type want struct {
	code   int
	reason metav1.StatusReason
	// causes are the fields the Status details must name, in any order.
	causes []string
	// message, when set, must be the Status message.
	message string
	// details, when set, are the Status details' name and kind.
	name, kind string
}

// reject sends a request, checks it is answered with the Status w
// describes, and that etcd is unchanged.
func (b *badInput) reject(t *testing.T, method, path string, body []byte, w want, headers ...string) *metav1.Status {
	t.Helper()
	before := testState(t, b.c)
	revBefore := etcdRevision(t, b.c)
	resp, data := b.rc.do(t, method, path, body, headers...)
	if resp.StatusCode != w.code {
		t.Errorf("%s %s: HTTP %d, want %d; body %.300s", method, path, resp.StatusCode, w.code, data)
	}
	st := decodeStatus(t, resp, data)
	if st.Reason != w.reason {
		t.Errorf("%s %s: reason %q, want %q (message %q)", method, path, st.Reason, w.reason, st.Message)
	}
	if w.message != "" && st.Message != w.message {
		t.Errorf("%s %s: message %q, want %q", method, path, st.Message, w.message)
	}
	if w.causes != nil {
		// kube-apiserver may name a field twice (object and update
		// validation both check labels): compare the set.
		seen := map[string]bool{}
		var got []string
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				if !seen[c.Field] {
					seen[c.Field] = true
					got = append(got, c.Field)
				}
			}
		}
		sort.Strings(got)
		sort.Strings(w.causes)
		if d := cmp.Diff(w.causes, got); d != "" {
			t.Errorf("%s %s: cause fields (-want +got):\n%s\nstatus: %+v", method, path, d, st)
		}
	}
	if w.name != "" || w.kind != "" {
		var name, kind string
		if st.Details != nil {
			name, kind = st.Details.Name, st.Details.Kind
		}
		if name != w.name || kind != w.kind {
			t.Errorf("%s %s: details name=%q kind=%q, want %q %q", method, path, name, kind, w.name, w.kind)
		}
	}
	if d := cmp.Diff(before, testState(t, b.c)); d != "" {
		t.Errorf("%s %s changed etcd (-before +after):\n%s", method, path, d)
	}
	if keys := writtenSince(t, b.c, revBefore); len(keys) > 0 {
		t.Errorf("%s %s: etcd written after revision %d: %v", method, path, revBefore, keys)
	}
	return st
}

// background are the keys the tier writes on its own, whatever a test
// does, and a rejected request must change nothing else: the aggregated
// ClusterRoles (admin, edit, view, ...) the gateway's aggregation loop
// stores a second or so after any ClusterRole changed, as
// kube-controller-manager's clusterrole-aggregation controller does; the
// Lease of the cluster-wide controllers, which the leader renews every
// few seconds; each gateway's apiserver identity Lease and
// kubernetes-Service endpoint lease; and the local APIServices the
// autoregister controller creates and keeps (as kube-apiserver's does)
// while the served groups settle after start.
var background = []string{"/registry/clusterroles/", "/registry/leases/kube-system/kgate-controllers",
	"/registry/leases/kube-system/apiserver-", "/registry/masterleases/",
	"/registry/apiregistration.k8s.io/apiservices/"}

func isBackground(key string) bool {
	for _, p := range background {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// testState is etcdState without the background keys.
func testState(tb testing.TB, c *devcluster.Cluster) map[string]string {
	tb.Helper()
	st := etcdState(tb, c)
	for k := range st {
		if isBackground(k) {
			delete(st, k)
		}
	}
	return st
}

// writtenSince lists the keys other than background keys written (put or
// deleted) after revision rev, up to etcd's current revision, as etcd's
// history tells: a write and its undo (create then delete) count too.
func writtenSince(tb testing.TB, c *devcluster.Cluster, rev int64) []string {
	tb.Helper()
	now := etcdRevision(tb, c)
	if now == rev {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	// Every revision is at least one event of the whole keyspace.
	for resp := range c.EtcdClient().Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			tb.Fatalf("cannot read etcd's history after %d: %v", rev, err)
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > now {
				return keys
			}
			if k := string(ev.Kv.Key); !isBackground(k) {
				keys = append(keys, fmt.Sprintf("%s@%d", k, ev.Kv.ModRevision))
			}
			if ev.Kv.ModRevision == now {
				return keys
			}
		}
	}
	tb.Fatalf("cannot read etcd's history after %d up to %d: %v", rev, now, ctx.Err())
	return nil
}

func cmJSON(ns, name, extra string) []byte {
	nsField := ""
	if ns != "" {
		nsField = fmt.Sprintf(`,"namespace":%q`, ns)
	}
	return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q%s%s},"data":{"k":"new"}}`, name, nsField, extra))
}

// toJSON is the body of a PUT of cm (apiVersion and kind set).
func toJSON(t *testing.T, cm *corev1.ConfigMap) []byte {
	t.Helper()
	cm = cm.DeepCopy()
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	b, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const ctJSON, ctYAML = "application/json", "application/yaml"

func TestRejectMalformedJSON(t *testing.T) {
	b := newBadInput(t)
	bad := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"k":`)
	b.reject(t, "POST", b.cmPath(""), bad, want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctJSON)
	b.reject(t, "PUT", b.cmPath("cm"), bad, want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctJSON)
	b.reject(t, "POST", b.cmPath(""), []byte(`not json at all`), want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctJSON)
}

func TestRejectMalformedYAML(t *testing.T) {
	b := newBadInput(t)
	bad := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {k: [\n")
	b.reject(t, "POST", b.cmPath(""), bad, want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctYAML)
	bad = []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: cm\n")
	b.reject(t, "PUT", b.cmPath("cm"), bad, want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctYAML)
}

func TestRejectTypeNotMatchingURL(t *testing.T) {
	b := newBadInput(t)
	for _, body := range []string{
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`,
		`{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
		`{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"x"}}`,
	} {
		b.reject(t, "POST", b.cmPath(""), []byte(body), want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctJSON)
	}
	b.reject(t, "PUT", b.cmPath("cm"), []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"cm"}}`),
		want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctJSON)
}

func TestRejectNamespaceNotMatchingURL(t *testing.T) {
	b := newBadInput(t)
	b.reject(t, "POST", b.cmPath(""), cmJSON("other", "x", ""), want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctJSON)
	b.reject(t, "PUT", b.cmPath("cm"), cmJSON("other", "cm", ""), want{code: 400, reason: metav1.StatusReasonBadRequest}, "Content-Type", ctJSON)
}

func TestRejectUnknownResource(t *testing.T) {
	b := newBadInput(t)
	w := want{code: 404, reason: metav1.StatusReasonNotFound}
	b.reject(t, "POST", "/api/v1/namespaces/"+b.ns+"/widgets", cmJSON("", "x", ""), w, "Content-Type", ctJSON)
	b.reject(t, "GET", "/api/v1/namespaces/"+b.ns+"/widgets/x", nil, w)
	b.reject(t, "GET", "/apis/example.com/v1/widgets", nil, w)
	b.reject(t, "GET", "/api/v2/namespaces/"+b.ns+"/configmaps", nil, w)
}

func TestRejectInvalidName(t *testing.T) {
	b := newBadInput(t)
	b.reject(t, "POST", b.cmPath(""), cmJSON("", "Bad_Name", ""), want{
		code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.name"}, name: "Bad_Name", kind: "ConfigMap",
	}, "Content-Type", ctJSON)
}

func TestRejectInvalidLabelValue(t *testing.T) {
	b := newBadInput(t)
	w := want{code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.labels"}, kind: "ConfigMap"}
	w.name = "x"
	b.reject(t, "POST", b.cmPath(""), cmJSON("", "x", `,"labels":{"app":"bad value!"}`), w, "Content-Type", ctJSON)
	w.name = "cm"
	upd := b.cm.DeepCopy()
	upd.Labels["app"] = "bad value!"
	b.reject(t, "PUT", b.cmPath("cm"), toJSON(t, upd), w, "Content-Type", ctJSON)
	b.reject(t, "PATCH", b.cmPath("cm"), []byte(`{"metadata":{"labels":{"app":"-bad-"}}}`), w, "Content-Type", "application/merge-patch+json")
}

// TestRejectBodyTooLarge sends a ConfigMap just over kube-apiserver's
// 3 MiB limit: the Status must reach the client, which with
// kube-apiserver it does (it reads the body up to the limit, answers 413
// and drains the small rest).
func TestRejectBodyTooLarge(t *testing.T) {
	b := newBadInput(t)
	before := testState(t, b.c)
	big := strings.Repeat("x", 3<<20)
	body := []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":%q}}`, big))

	t.Run("headers-only", func(t *testing.T) {
		// The gateway's answer itself, read before any body byte is sent.
		tlsCfg, err := rest.TLSConfigFor(restConfig(t, b.c, true, nil))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", b.c.Addr(), tlsCfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: kgate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", b.cmPath(""), len(body))
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		data, _ := io.ReadAll(resp.Body)
		st := decodeStatus(t, resp, data)
		if resp.StatusCode != 413 || st.Reason != metav1.StatusReasonRequestEntityTooLarge {
			t.Errorf("HTTP %d reason %q, want 413 RequestEntityTooLarge", resp.StatusCode, st.Reason)
		}
	})
	// Whether the Status reaches the client depends on a race between
	// the client writing the body and the server closing: try a few times.
	const attempts = 10
	t.Run("raw-client", func(t *testing.T) {
		failed := 0
		var last error
		for range attempts {
			req, err := http.NewRequest("POST", b.rc.base+b.cmPath(""), bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", ctJSON)
			resp, err := b.rc.hc.Do(req)
			if err != nil {
				failed, last = failed+1, err
				continue
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			st := decodeStatus(t, resp, data)
			if resp.StatusCode != 413 || st.Reason != metav1.StatusReasonRequestEntityTooLarge {
				t.Errorf("HTTP %d reason %q, want 413 RequestEntityTooLarge", resp.StatusCode, st.Reason)
			}
		}
		if failed > 0 {
			t.Errorf("POST of %d bytes: %d of %d attempts got no Status, last: %v", len(body), failed, attempts, last)
		}
	})
	for _, json := range []bool{false, true} {
		t.Run(fmt.Sprintf("client-go/json=%v", json), func(t *testing.T) {
			cs := clientset(t, b.c, json, nil)
			failed := 0
			var last error
			for range attempts {
				_, err := cs.CoreV1().ConfigMaps(b.ns).Create(context.Background(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{"k": big},
				}, metav1.CreateOptions{})
				if !apierrors.IsRequestEntityTooLargeError(err) {
					failed, last = failed+1, err
				}
			}
			if failed > 0 {
				t.Errorf("create of a >3 MiB ConfigMap: %d of %d attempts did not get a RequestEntityTooLarge API error, last: %v (%T)", failed, attempts, last, last)
			}
		})
	}
	if d := cmp.Diff(before, testState(t, b.c)); d != "" {
		t.Errorf("etcd changed (-before +after):\n%s", d)
	}
}

func TestRejectStaleUpdate(t *testing.T) {
	b := newBadInput(t)
	cs := clientset(t, b.c, true, nil)
	cur := b.cm.DeepCopy()
	cur.Data["k"] = "v2"
	if _, err := cs.CoreV1().ConfigMaps(b.ns).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// b.cm's resourceVersion is now stale.
	body := []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","resourceVersion":%q},"data":{"k":"v3"}}`, b.cm.ResourceVersion))
	b.reject(t, "PUT", b.cmPath("cm"), body, want{
		code: 409, reason: metav1.StatusReasonConflict, name: "cm", kind: "configmaps",
		message: `Operation cannot be fulfilled on configmaps "cm": the object has been modified; please apply your changes to the latest version and try again`,
	}, "Content-Type", ctJSON)
}

func TestRejectCreateExisting(t *testing.T) {
	b := newBadInput(t)
	b.reject(t, "POST", b.cmPath(""), cmJSON("", "cm", ""), want{
		code: 409, reason: metav1.StatusReasonAlreadyExists, name: "cm", kind: "configmaps",
		message: `configmaps "cm" already exists`,
	}, "Content-Type", ctJSON)
}

func TestRejectUnsupportedMediaType(t *testing.T) {
	b := newBadInput(t)
	w := want{code: 415, reason: metav1.StatusReasonUnsupportedMediaType}
	b.reject(t, "POST", b.cmPath(""), cmJSON("", "x", ""), w, "Content-Type", "text/plain")
	b.reject(t, "PUT", b.cmPath("cm"), cmJSON("", "cm", ""), w, "Content-Type", "application/xml")
	b.reject(t, "PATCH", b.cmPath("cm"), []byte(`{"data":{"k":"p"}}`), w, "Content-Type", "application/json")
}

func TestRejectNotAcceptable(t *testing.T) {
	b := newBadInput(t)
	w := want{code: 406, reason: metav1.StatusReasonNotAcceptable}
	b.reject(t, "GET", b.cmPath("cm"), nil, w, "Accept", "text/html")
	b.reject(t, "GET", b.cmPath(""), nil, w, "Accept", "application/xml")
	b.reject(t, "GET", b.cmPath("")+"?watch=true", nil, w, "Accept", "application/yaml")
}

func TestRejectBadSelectors(t *testing.T) {
	b := newBadInput(t)
	w := want{code: 400, reason: metav1.StatusReasonBadRequest}
	for _, q := range []string{
		"labelSelector=" + url.QueryEscape("app in ("),
		"labelSelector=" + url.QueryEscape("=x"),
		"labelSelector=" + url.QueryEscape("app=bad value!"),
		"fieldSelector=" + url.QueryEscape("metadata.name"),
		"fieldSelector=" + url.QueryEscape("spec.nodeName=n1"), // not a ConfigMap field
		"fieldSelector=" + url.QueryEscape("data.k=v"),
	} {
		b.reject(t, "GET", b.cmPath("")+"?"+q, nil, w)
		b.reject(t, "GET", b.cmPath("")+"?watch=true&"+q, nil, w)
	}
}

func TestRejectInvalidResourceVersion(t *testing.T) {
	b := newBadInput(t)
	// kgate answers 400; kube-apiserver 1.37 still answers 500 here
	// (kubernetes/kubernetes#139485).
	w := want{code: 400, reason: metav1.StatusReasonBadRequest}
	for _, rv := range []string{"abc", "-1", "1.5"} {
		b.reject(t, "GET", b.cmPath("cm")+"?resourceVersion="+rv, nil, w)
		b.reject(t, "GET", b.cmPath("")+"?resourceVersion="+rv, nil, w)
		b.reject(t, "GET", b.cmPath("")+"?watch=true&resourceVersion="+rv, nil, w)
	}
}

func TestRejectFailedJSONPatchTest(t *testing.T) {
	b := newBadInput(t)
	patch := []byte(`[{"op":"test","path":"/data/k","value":"not-v"},{"op":"replace","path":"/data/k","value":"patched"}]`)
	b.reject(t, "PATCH", b.cmPath("cm"), patch, want{code: 422, reason: metav1.StatusReasonInvalid}, "Content-Type", "application/json-patch+json")
}

// TestErrorsForTypedClients checks that client-go sees these errors as
// typed API errors, with a protobuf and a JSON client.
func TestErrorsForTypedClients(t *testing.T) {
	b := newBadInput(t)
	for _, json := range []bool{false, true} {
		var w wire
		cs := clientset(t, b.c, json, &w)
		cms := cs.CoreV1().ConfigMaps(b.ns)
		ctx := context.Background()
		_, err := cms.Get(ctx, "missing", metav1.GetOptions{})
		checkAPIError(t, err, http.StatusNotFound, metav1.StatusReasonNotFound, `configmaps "missing" not found`)
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
		checkAPIError(t, err, http.StatusConflict, metav1.StatusReasonAlreadyExists, `configmaps "cm" already exists`)
		stale := b.cm.DeepCopy()
		stale.ResourceVersion = "1"
		_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
		checkAPIError(t, err, http.StatusConflict, metav1.StatusReasonConflict, "")
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}, metav1.CreateOptions{})
		checkAPIError(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
		t.Logf("json=%v wire:\n%s", json, strings.Join(w.all(), "\n"))
	}
}

func checkAPIError(t *testing.T, err error, code int32, reason metav1.StatusReason, message string) {
	t.Helper()
	st, ok := err.(interface{ Status() metav1.Status })
	if !ok {
		t.Errorf("error %v (%T) is not an API status error", err, err)
		return
	}
	s := st.Status()
	if s.Code != code || s.Reason != reason || (message != "" && s.Message != message) {
		t.Errorf("error code=%d reason=%q message=%q, want %d %q %q", s.Code, s.Reason, s.Message, code, reason, message)
	}
}

// TestUpdateFillsSystemFields replaces a ConfigMap with a manifest that
// lacks what the server set (uid, creationTimestamp) and, once, the
// resourceVersion too, as `kubectl replace -f` sends it. kube-apiserver
// takes uid and creationTimestamp from the stored object (rest.BeforeUpdate)
// and, for kinds that allow unconditional updates (ConfigMap does), the
// resourceVersion too: 200 with the stored uid.
func TestUpdateFillsSystemFields(t *testing.T) {
	b := newBadInput(t)
	cs := clientset(t, b.c, true, nil)
	f := func(name string, withRV bool) {
		t.Run(name, func(t *testing.T) {
			cur, err := cs.CoreV1().ConfigMaps(b.ns).Get(context.Background(), "cm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"`
			if withRV {
				body += fmt.Sprintf(`,"resourceVersion":%q`, cur.ResourceVersion)
			}
			body += `},"data":{"k":"replaced-` + name + `"}}`
			resp, data := b.rc.do(t, "PUT", b.cmPath("cm"), []byte(body), "Content-Type", ctJSON)
			if resp.StatusCode != 200 {
				t.Fatalf("PUT %s: HTTP %d, want 200; body %s", body, resp.StatusCode, data)
			}
			var got corev1.ConfigMap
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if got.UID != cur.UID || !got.CreationTimestamp.Equal(&cur.CreationTimestamp) || got.Data["k"] != "replaced-"+name {
				t.Errorf("PUT answered uid=%q created=%v data=%v, want uid %q created %v", got.UID, got.CreationTimestamp, got.Data, cur.UID, cur.CreationTimestamp)
			}
		})
	}
	f("with-resourceVersion", true)
	f("without-resourceVersion", false)
}
