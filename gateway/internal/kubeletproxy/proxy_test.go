package kubeletproxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apiserver/pkg/authentication/user"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/deploy/fakekubelet"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/hijackhttp"
	"github.com/kgate/kgate/gateway/internal/proxyheader"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// objects is an in-memory objectStore.
type objects struct {
	mu   sync.Mutex
	objs map[string]runtime.Object // resource/ns/name
}

func (o *objects) put(res, ns, name string, obj runtime.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.objs[res+"/"+ns+"/"+name] = obj
}

func (o *objects) Get(_ context.Context, res *registry.Resource, ns, name string, _ int64) (runtime.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj, ok := o.objs[res.Resource+"/"+ns+"/"+name]
	if !ok {
		return nil, fmt.Errorf("cannot get %s %s/%s: %w", res.Resource, ns, name, storage.ErrNotFound)
	}
	return obj.DeepCopyObject(), nil
}

func (o *objects) List(_ context.Context, res *registry.Resource, ns string, _ storage.ListOptions) (*storage.ListResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := &storage.ListResult{Revision: 1}
	prefix := res.Resource + "/" + ns + "/"
	for k, obj := range o.objs {
		if strings.HasPrefix(k, prefix) {
			out.Items = append(out.Items, obj.DeepCopyObject())
		}
	}
	return out, nil
}

// verbs is an authorizer allowing everything but the verbs it lists.
type verbs struct{ deny map[string]bool }

func (v verbs) Authorize(a authz.Attributes) (authz.Decision, string) {
	if v.deny[a.Verb] {
		return authz.NoOpinion, ""
	}
	return authz.Allow, ""
}

var (
	schemeOnce sync.Once
	scheme     *runtime.Scheme
	schemeErr  error
)

func testScheme(t *testing.T) *runtime.Scheme {
	schemeOnce.Do(func() {
		var sem *builtin.Semantics
		sem, schemeErr = builtin.New(registry.Builtin())
		if schemeErr == nil {
			scheme = sem.Scheme()
		}
	})
	if schemeErr != nil {
		t.Fatal(schemeErr)
	}
	return scheme
}

type env struct {
	t       *testing.T
	kubelet *fakekubelet.Kubelet
	objs    *objects
	proxy   *Proxy
	cancel  context.CancelFunc
	url     string // the fasthttp server's
	user    user.Info
}

type envConfig struct {
	allowLoopback bool
	deny          map[string]bool
	admission     Admission
}

func newEnv(t *testing.T, ec envConfig) *env {
	t.Helper()
	pki, err := fakekubelet.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, err := fakekubelet.Start(pki, "hello", "world")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	objs := &objects{objs: map[string]runtime.Object{}}
	objs.put("nodes", "", "n1", &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(k.Port())}},
		},
	})
	objs.put("pods", "default", "p", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status:     corev1.PodStatus{PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}},
	})
	objs.put("pods", "default", "pending", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	})
	base, cancel := context.WithCancel(context.Background())
	p, err := New(base, Config{
		ClientCertFile: pki.ClientCertFile, ClientKeyFile: pki.ClientKeyFile, CAFile: pki.CAFile,
		AllowLoopbackTargets: ec.allowLoopback,
	}, Deps{Registry: reg, Store: objs, Scheme: testScheme(t), Authorizer: verbs{ec.deny}, Admission: ec.admission, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, kubelet: k, objs: objs, proxy: p, cancel: cancel, user: &user.DefaultInfo{Name: "alice"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: e.handle}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := p.Wait(context.Background()); err != nil {
			t.Error(err)
		}
		_ = srv.Shutdown()
		<-served
	})
	e.url = "http://" + ln.Addr().String()
	return e
}

// handle is the gateway's pipeline in short: parse, serve, Status.
func (e *env) handle(rc *fasthttp.RequestCtx) {
	var info requestinfo.Info
	rc.Response.Header.Set(hijackhttp.HeaderAuditID, "audit-1")
	if err := requestinfo.Parse(&info, string(rc.Method()), string(rc.Path()), rc.QueryArgs()); err != nil || !Serves(&info) {
		rc.SetStatusCode(404)
		return
	}
	if err := e.proxy.Serve(rc, &info, e.user); err != nil {
		st := apierror.Status(err, schema.GroupResource{Resource: info.Resource}, info.Name)
		rc.SetStatusCode(int(st.Code))
		rc.SetBodyString(st.Message)
	}
}

func (e *env) get(path string, header http.Header) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, string(b)
}

func TestLogs(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true})
	resp, body := e.get("/api/v1/namespaces/default/pods/p/log?tailLines=10&timestamps=true", nil)
	if resp.StatusCode != 200 || body != "hello\nworld\n" {
		t.Fatalf("log: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Content-Type"); got != "text/plain" {
		t.Errorf("Content-Type = %q, want text/plain", got)
	}
	reqs := e.kubelet.Requests()
	last := reqs[len(reqs)-1]
	if last.Path != "/containerLogs/default/p/c" || !strings.Contains(last.RawQuery, "tailLines=10") || !strings.Contains(last.RawQuery, "timestamps=true") {
		t.Errorf("kubelet saw %s?%s", last.Path, last.RawQuery)
	}
	if last.ClientCN != "kube-apiserver-kubelet-client" {
		t.Errorf("kubelet client CN = %q", last.ClientCN)
	}

	for _, tt := range []struct {
		path string
		code int
	}{
		{"/api/v1/namespaces/default/pods/missing/log", 404},
		{"/api/v1/namespaces/default/pods/p/log?container=nope", 400},
		{"/api/v1/namespaces/default/pods/p/log?tailLines=-1", 422},
		{"/api/v1/namespaces/default/pods/pending/log", 200}, // not scheduled: empty
	} {
		if resp, body := e.get(tt.path, nil); resp.StatusCode != tt.code {
			t.Errorf("GET %s = %d %q, want %d", tt.path, resp.StatusCode, body, tt.code)
		}
	}
}

// TestLogsFollow: each line reaches the client as the kubelet writes it,
// and the gateway's shutdown ends the stream.
func TestLogsFollow(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true})
	resp, err := http.Get(e.url + "/api/v1/namespaces/default/pods/p/log?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for _, want := range []string{"hello\n", "world\n"} {
		if l, err := r.ReadString('\n'); err != nil || l != want {
			t.Fatalf("line = %q, %v; want %q", l, err, want)
		}
	}
	e.kubelet.Follow <- "later"
	if l, err := r.ReadString('\n'); err != nil || l != "later\n" {
		t.Fatalf("followed line = %q, %v", l, err)
	}
	e.cancel() // shutdown
	if err := e.proxy.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after shutdown: %q, %v; want a clean end", rest, err)
	}
}

func TestExec(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true})
	cfg := &restclient.Config{Host: e.url}
	u, _ := url.Parse(e.url + "/api/v1/namespaces/default/pods/p/exec?command=echo&command=hi&stdout=true&stderr=true")
	spdyExec, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"spdy": spdyExec, "websocket": wsExec} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
				t.Fatalf("exec: %v (stderr %q)", err, errOut.String())
			}
			if out.String() != "hi\n" {
				t.Fatalf("stdout = %q, want %q", out.String(), "hi\n")
			}
		})
	}
	// stdin both ways: cat over WebSocket (translated to SPDY) and SPDY.
	cu, _ := url.Parse(e.url + "/api/v1/namespaces/default/pods/p/exec?command=cat&stdin=true&stdout=true")
	catSPDY, _ := remotecommand.NewSPDYExecutor(cfg, "POST", cu)
	catWS, _ := remotecommand.NewWebSocketExecutor(cfg, "GET", cu.String())
	for name, ex := range map[string]remotecommand.Executor{"spdy": catSPDY, "websocket": catWS} {
		t.Run("cat-"+name, func(t *testing.T) {
			var out bytes.Buffer
			if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("ping\n"), Stdout: &out}); err != nil {
				t.Fatalf("exec cat: %v", err)
			}
			if out.String() != "ping\n" {
				t.Fatalf("stdout = %q", out.String())
			}
		})
	}
}

// TestUpgradeNeedsCreate: a WebSocket upgrade (GET) of exec needs the
// create verb, as SPDY's POST does (upstream's
// AuthorizePodWebsocketUpgradeCreatePermission).
func TestUpgradeNeedsCreate(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true, deny: map[string]bool{"create": true}})
	h := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {"v5.channel.k8s.io"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	if resp, body := e.get("/api/v1/namespaces/default/pods/p/exec?command=echo&stdout=true", h); resp.StatusCode != 403 {
		t.Fatalf("WebSocket exec without create: %d %q, want 403", resp.StatusCode, body)
	}
	for _, r := range e.kubelet.Requests() {
		if strings.HasPrefix(r.Path, "/exec/") {
			t.Fatalf("kubelet reached: %s", r.Path)
		}
	}
}

func TestPortForward(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true})
	cfg := &restclient.Config{Host: e.url}
	u, _ := url.Parse(e.url + "/api/v1/namespaces/default/pods/p/portforward")
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]httpstream.Dialer{"spdy": spdyDialer, "websocket": wsDialer} {
		t.Run(name, func(t *testing.T) {
			stop, ready := make(chan struct{}), make(chan struct{})
			fw, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- fw.ForwardPorts() }()
			select {
			case <-ready:
			case err := <-errc:
				t.Fatalf("port-forward: %v", err)
			}
			ports, err := fw.GetPorts()
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
			if err != nil {
				t.Fatal(err)
			}
			// The pod's port echoes: bytes go both ways.
			if _, err := io.WriteString(c, "ping through the tunnel\n"); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || line != "ping through the tunnel\n" {
				t.Fatalf("echo = %q, %v", line, err)
			}
			c.Close()
			close(stop)
			if err := <-errc; err != nil {
				t.Fatalf("port-forward ended: %v", err)
			}
		})
	}
}

// TestNodeProxy: nodes/proxy reaches the kubelet with its client
// certificate, and no client credential or identity header gets there.
func TestNodeProxy(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true})
	spoofed := http.Header{
		"Authorization":            {"Bearer secret-token"},
		"Proxy-Authorization":      {"Basic c2VjcmV0"},
		"Impersonate-User":         {"admin"},
		"Impersonate-Group":        {"system:masters"},
		"Impersonate-Extra-Scopes": {"all"},
		"Impersonate-Uid":          {"1"},
		"X-Remote-User":            {"admin"},
		"X-Remote-Group":           {"system:masters"},
		"X-Remote-Extra-Scopes":    {"all"},
		"X-Remote-Uid":             {"0"},
		"x_remote_user":            {"admin"},
		"X-Kept":                   {"yes"},
	}
	resp, body := e.get("/api/v1/nodes/n1/proxy/healthz", spoofed)
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	reqs := e.kubelet.Requests()
	last := reqs[len(reqs)-1]
	if last.Path != "/healthz" || last.ClientCN != "kube-apiserver-kubelet-client" {
		t.Fatalf("kubelet saw %s from %q", last.Path, last.ClientCN)
	}
	for name := range last.Header {
		if !proxyheader.Forwardable(name) {
			t.Errorf("header %s reached the kubelet", name)
		}
	}
	if last.Header.Get("X-Kept") != "yes" {
		t.Errorf("an ordinary header was dropped: %v", last.Header)
	}

	// Another port of the node: the plain transport, no client cert.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "port "+r.URL.Path)
	}))
	defer srv.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	if resp, body := e.get("/api/v1/nodes/http:n1:"+port+"/proxy/x/", nil); resp.StatusCode != 200 || body != "port /x/" {
		t.Fatalf("node port: %d %q", resp.StatusCode, body)
	}
	if resp, _ := e.get("/api/v1/nodes/missing/proxy/healthz", nil); resp.StatusCode != 404 {
		t.Fatalf("missing node: %d", resp.StatusCode)
	}
}

func TestPodProxy(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true})
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	}))
	defer srv.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	resp, body := e.get("/api/v1/namespaces/default/pods/p:"+port+"/proxy/a/b?q=1", http.Header{"Authorization": {"Bearer x"}})
	if resp.StatusCode != 200 || body != "GET /a/b?q=1" {
		t.Fatalf("pod proxy: %d %q", resp.StatusCode, body)
	}
	if seen.Get("Authorization") != "" {
		t.Fatal("Authorization reached the pod")
	}
}

func TestServiceProxy(t *testing.T) {
	e := newEnv(t, envConfig{allowLoopback: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "service "+r.URL.Path)
	}))
	defer srv.Close()
	port := int32(srv.Listener.Addr().(*net.TCPAddr).Port)
	e.objs.put("services", "default", "svc", &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 80}}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	})
	e.objs.put("services", "default", "empty", &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 80}}},
	})
	ready := true
	e.objs.put("endpointslices", "default", "svc-1", &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "svc-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("web"), Port: &port}},
	})
	for _, id := range []string{"svc:80", "svc:web", "http:svc:web"} {
		if resp, body := e.get("/api/v1/namespaces/default/services/"+id+"/proxy/x", http.Header{"Authorization": {"Bearer x"}}); resp.StatusCode != 200 || body != "service /x" {
			t.Errorf("services/%s/proxy: %d %q", id, resp.StatusCode, body)
		}
	}
	for _, tt := range []struct {
		path string
		code int
	}{
		{"/api/v1/namespaces/default/services/empty/proxy/", 503},
		{"/api/v1/namespaces/default/services/svc:81/proxy/", 503},
		{"/api/v1/namespaces/default/services/missing/proxy/", 404},
	} {
		if resp, body := e.get(tt.path, nil); resp.StatusCode != tt.code {
			t.Errorf("GET %s = %d %q, want %d", tt.path, resp.StatusCode, body, tt.code)
		}
	}
}

// TestRefusesLoopback: without AllowLoopbackTargets, loopback targets are
// refused before anything is dialed.
func TestRefusesLoopback(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, path := range []string{
		"/api/v1/nodes/n1/proxy/healthz",
		"/api/v1/namespaces/default/pods/p/log",
		"/api/v1/namespaces/default/pods/p:80/proxy/",
	} {
		resp, body := e.get(path, nil)
		if resp.StatusCode != 400 || !strings.Contains(body, "address not allowed") {
			t.Errorf("GET %s = %d %q, want 400 address not allowed", path, resp.StatusCode, body)
		}
	}
	if n := len(e.kubelet.Requests()); n != 0 {
		t.Fatalf("kubelet saw %d requests", n)
	}
}

// TestShutdownEndsSessions: an exec session still running when the
// gateway shuts down is ended, and Wait returns once it has.
func TestShutdownEndsSessions(t *testing.T) {
	for _, name := range []string{"spdy", "websocket"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envConfig{allowLoopback: true})
			cfg := &restclient.Config{Host: e.url}
			u, _ := url.Parse(e.url + "/api/v1/namespaces/default/pods/p/exec?command=cat&stdin=true&stdout=true")
			var ex remotecommand.Executor
			var err error
			if name == "spdy" {
				ex, err = remotecommand.NewSPDYExecutor(cfg, "POST", u)
			} else {
				ex, err = remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
			}
			if err != nil {
				t.Fatal(err)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ended := make(chan error, 1)
			go func() {
				ended <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: inR, Stdout: outW})
				outW.Close()
			}()
			go func() { _, _ = io.WriteString(inW, "still here\n") }()
			if l, err := bufio.NewReader(outR).ReadString('\n'); err != nil || l != "still here\n" {
				t.Fatalf("session: %q, %v", l, err)
			}
			e.cancel() // the gateway shuts down
			if err := e.proxy.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-ended // the client sees its session end
			go io.Copy(io.Discard, outR)
			inW.Close()
		})
	}
}
