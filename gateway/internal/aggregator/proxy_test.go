package aggregator

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/gateway/internal/aggregator/aggregatortest"
	"github.com/kgate/kgate/storage/registry"
)

type apiServiceMap map[string]*apiregistrationv1.APIService

func (m apiServiceMap) Get(name string) (*apiregistrationv1.APIService, bool) {
	s, ok := m[name]
	return s, ok
}

// TestProxy: an extension server of the test on 127.0.0.1, reached
// through an EndpointSlice with aggregator routing, sees the front-proxy
// certificate and the gateway's user (never the client's headers); a
// watch streams event by event; an unavailable APIService and a stopped
// server are 503 Status.
// extension is a test extension server on 127.0.0.1: it answers with
// what it saw (client certificate CN, path, headers) and streams the
// lines sent on next to a watch; store resolves Service ext/api to it.
type extension struct {
	serving               *aggregatortest.CA
	clientCert, clientKey []byte
	next                  chan string
	stop                  func() // ends the watches
	backend               *httptest.Server
	reg                   *registry.Registry
	store                 memStore
	openAPI               *openAPIDocs // what it answers under /openapi/
}

// openAPIDocs are the answers of an extension server under /openapi/,
// set by the test, and who asked for what.
type openAPIDocs struct {
	mu    sync.Mutex
	docs  map[string]openAPIDoc // by path and query
	asked []string              // "path user groups [If-None-Match]"
}

type openAPIDoc struct {
	status int
	etag   string
	body   string
}

func (d *openAPIDocs) set(path string, doc openAPIDoc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.docs == nil {
		d.docs = map[string]openAPIDoc{}
	}
	d.docs[path] = doc
}

// take returns what was asked since the last take.
func (d *openAPIDocs) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.asked
	d.asked = nil
	return out
}

func (d *openAPIDocs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := r.URL.Path
	if r.URL.RawQuery != "" {
		key += "?" + r.URL.RawQuery
	}
	d.asked = append(d.asked, strings.TrimSpace(fmt.Sprintf("%s %s %v %s", key, r.Header.Get("X-Remote-User"), r.Header.Values("X-Remote-Group"), r.Header.Get("If-None-Match"))))
	doc, ok := d.docs[key]
	switch {
	case !ok:
		http.NotFound(w, r)
	case doc.etag != "" && r.Header.Get("If-None-Match") == doc.etag:
		w.WriteHeader(http.StatusNotModified)
	default:
		if doc.etag != "" {
			w.Header().Set("Etag", doc.etag)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(cmp.Or(doc.status, http.StatusOK))
		_, _ = io.WriteString(w, doc.body)
	}
}

func startExtension(t *testing.T) *extension {
	t.Helper()
	serving, front := aggregatortest.NewCA(t, "serving-ca"), aggregatortest.NewCA(t, "front-proxy-ca")
	serverCert, serverKey := serving.Issue(t, "api", "api.ext.svc")
	clientCert, clientKey := front.Issue(t, "front-proxy-client")
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(front.PEM)
	docs := &openAPIDocs{}
	next := make(chan string)
	var closeNext sync.Once
	stop := func() { closeNext.Do(func() { close(next) }) }
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/openapi/") {
			docs.ServeHTTP(w, r)
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush() // headers now, as a watch server sends them
			for ev := range next {
				fmt.Fprintln(w, ev)
				w.(http.Flusher).Flush()
			}
			return
		}
		if gv, ok := strings.CutPrefix(r.URL.Path, "/apis/"); ok && strings.Count(gv, "/") == 1 {
			// Its discovery of any group/version, telling who asked;
			// liar.example.com describes another.
			if strings.HasPrefix(gv, "liar.example.com/") {
				gv = "example.com/v1"
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: gv,
				APIResources: []metav1.APIResource{
					{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: []string{"get", "list", "watch"}, ShortNames: []string{"wd"}},
					{Name: "widgets/status", Namespaced: true, Kind: "Widget", Verbs: []string{"get"}},
					{Name: r.Header.Get("X-Remote-User") + "." + strings.Join(r.Header.Values("X-Remote-Group"), "+"), Kind: "Asker"},
				},
			})
			return
		}
		seen := map[string]any{
			"cn":     r.TLS.PeerCertificates[0].Subject.CommonName,
			"path":   r.URL.Path,
			"header": r.Header,
		}
		_ = json.NewEncoder(w).Encode(seen)
	}))
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}
	backend.StartTLS()
	t.Cleanup(backend.Close)
	t.Cleanup(stop) // runs first: a failed test leaves no handler waiting
	_, portStr, _ := net.SplitHostPort(backend.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	svcRes, _ := reg.Lookup(servicesGVR)
	sliceRes, _ := reg.Lookup(slicesGVR)
	store := memStore{
		svcRes.Key("ext", "api"): &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ext", Name: "api"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
		sliceRes.Key("ext", "api-x"): &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ext", Name: "api-x", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}},
		},
	}
	return &extension{serving: serving, clientCert: clientCert, clientKey: clientKey, next: next, stop: stop, backend: backend, reg: reg, store: store, openAPI: docs}
}

func TestProxy(t *testing.T) {
	x := startExtension(t)
	serving, clientCert, clientKey, next, stop, backend, reg, store := x.serving, x.clientCert, x.clientKey, x.next, x.stop, x.backend, x.reg, x.store
	available := func(ok bool) *apiregistrationv1.APIService {
		st := apiregistrationv1.ConditionTrue
		if !ok {
			st = apiregistrationv1.ConditionFalse
		}
		return &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: "v1.example.com", ResourceVersion: "1"},
			Spec: apiregistrationv1.APIServiceSpec{Group: "example.com", Version: "v1", CABundle: serving.PEM,
				Service: &apiregistrationv1.ServiceReference{Namespace: "ext", Name: "api"}},
			Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: st}}},
		}
	}
	services := apiServiceMap{"v1.example.com": available(true), "v1.down.example.com": available(false)}
	services["v1.down.example.com"].Name = "v1.down.example.com"
	p := &Proxy{Services: services, Resolver: &Resolver{Registry: reg, Store: store, AggregatorRouting: true, AllowLoopback: true},
		CertPEM: clientCert, KeyPEM: clientKey}
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"dev"}}
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r.WithContext(genericrequest.WithUser(r.Context(), alice)))
	}))
	t.Cleanup(gw.Close)

	get := func(path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gw.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := get("/apis/example.com/v1/namespaces/a/widgets", map[string]string{
		"Authorization": "Bearer secret", "X-Remote-User": "admin", "X-Remote-Group": "system:masters", "Impersonate-User": "admin", "Accept": "application/json"})
	var seen struct {
		CN     string      `json:"cn"`
		Path   string      `json:"path"`
		Header http.Header `json:"header"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen.CN != "front-proxy-client" || seen.Path != "/apis/example.com/v1/namespaces/a/widgets" {
		t.Errorf("backend saw %+v", seen)
	}
	if got := seen.Header.Values("X-Remote-User"); len(got) != 1 || got[0] != "alice" {
		t.Errorf("X-Remote-User %q", got)
	}
	if got := seen.Header.Values("X-Remote-Group"); len(got) != 1 || got[0] != "dev" {
		t.Errorf("X-Remote-Group %q", got)
	}
	if seen.Header.Get("Authorization") != "" || seen.Header.Get("Impersonate-User") != "" || seen.Header.Get("Accept") != "application/json" {
		t.Errorf("backend headers %v", seen.Header)
	}

	// A watch streams: each event arrives before the next is sent.
	resp = get("/apis/example.com/v1/widgets?watch=true", nil)
	r := bufio.NewReader(resp.Body)
	for i := range 3 {
		ev := fmt.Sprintf(`{"type":"ADDED","n":%d}`, i)
		next <- ev
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != ev {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
	}
	stop()
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	status := func(path string, code int) {
		t.Helper()
		resp := get(path, nil)
		defer resp.Body.Close()
		var st metav1.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatalf("%s: not a Status: %v", path, err)
		}
		if resp.StatusCode != code || st.Kind != "Status" || st.Code != int32(code) {
			t.Errorf("%s: %d %+v, want %d", path, resp.StatusCode, st, code)
		}
	}
	status("/apis/down.example.com/v1/things", http.StatusServiceUnavailable)
	status("/apis/nothere.example.com/v1/things", http.StatusNotFound)
	backend.Close()
	status("/apis/example.com/v1/widgets", http.StatusServiceUnavailable)
}
