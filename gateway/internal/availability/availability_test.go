package availability

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/gateway/internal/aggregator"
	"github.com/kgate/kgate/gateway/internal/aggregator/aggregatortest"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

// extension is an extension server of the test on 127.0.0.1: it answers
// discovery of ext.example.com/v1 when the front-proxy certificate and
// the check's identity come with the request, and status on other paths.
type extension struct {
	srv                   *httptest.Server
	port                  int32
	caPEM                 []byte
	clientCert, clientKey []byte
	status                int // answered to discovery; 200 unless set

	mu   sync.Mutex
	seen []http.Header
}

func startExtension(t *testing.T) *extension {
	t.Helper()
	serving, front := aggregatortest.NewCA(t, "serving-ca"), aggregatortest.NewCA(t, "front-proxy-ca")
	serverCert, serverKey := serving.Issue(t, "api", "api.ext.svc")
	x := &extension{caPEM: serving.PEM, status: http.StatusOK}
	x.clientCert, x.clientKey = front.Issue(t, "front-proxy-client")
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(front.PEM)
	x.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x.mu.Lock()
		x.seen = append(x.seen, r.Header.Clone())
		status := x.status
		x.mu.Unlock()
		if r.URL.Path != "/apis/ext.example.com/v1" {
			status = http.StatusNotFound
		}
		w.WriteHeader(status)
	}))
	x.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}
	x.srv.StartTLS()
	t.Cleanup(x.srv.Close)
	_, port, _ := net.SplitHostPort(x.srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	x.port = int32(p)
	return x
}

func (x *extension) setStatus(code int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.status = code
}

func (x *extension) lastSeen() http.Header {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.seen) == 0 {
		return nil
	}
	return x.seen[len(x.seen)-1]
}

func apiService(x *extension) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.ext.example.com", UID: "u1", ResourceVersion: "1"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "ext.example.com", Version: "v1", GroupPriorityMinimum: 100, VersionPriority: 10,
			Service:  &apiregistrationv1.ServiceReference{Namespace: "ext", Name: "api", Port: ptr.To(int32(443))},
			CABundle: x.caPEM,
		},
	}
}

func service(port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ext", Name: "api"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Name: "https", Port: port}}},
	}
}

func slice(portName string, port int32, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ext", Name: "api-x", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port)}},
	}
}

// backends answers from fields: the checks' inputs of one case.
type backends struct {
	svc       *corev1.Service
	svcErr    error
	slices    []*discoveryv1.EndpointSlice
	slicesErr error
	to        *url.URL
	resolve   error
}

func (b *backends) Service(_ context.Context, ns, name string) (*corev1.Service, error) {
	if b.svcErr != nil {
		return nil, b.svcErr
	}
	if b.svc == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
	}
	return b.svc, nil
}

func (b *backends) EndpointSlices(context.Context, string, string) ([]*discoveryv1.EndpointSlice, error) {
	return b.slices, b.slicesErr
}

func (b *backends) Resolve(context.Context, *apiregistrationv1.ServiceReference) (*url.URL, error) {
	if b.resolve != nil {
		return nil, b.resolve
	}
	u := *b.to
	return &u, nil
}

// TestCheck: each of upstream's reasons, in upstream's order, with its
// message.
func TestCheck(t *testing.T) {
	x := startExtension(t)
	to, err := url.Parse(x.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	external := service(443)
	external.Spec.Type = corev1.ServiceTypeExternalName
	external.Spec.Ports = nil
	for _, tc := range []struct {
		name    string
		b       backends
		cert    bool // present the front-proxy certificate
		status  int
		want    apiregistrationv1.ConditionStatus
		reason  string
		message string
	}{
		{name: "no service", want: "False", reason: "ServiceNotFound", message: `service/api in "ext" is not present`},
		{name: "service unreadable", b: backends{svcErr: errors.New("etcd down")}, want: "Unknown", reason: "ServiceAccessError",
			message: `service/api in "ext" cannot be checked due to: etcd down`},
		{name: "no such port", b: backends{svc: service(8443)}, want: "False", reason: "ServicePortError",
			message: `service/api in "ext" is not listening on port 443`},
		{name: "slices unreadable", b: backends{svc: service(443), slicesErr: errors.New("etcd down")}, want: "Unknown", reason: "EndpointsAccessError",
			message: `service/api in "ext" cannot be checked due to: etcd down`},
		{name: "no slices", b: backends{svc: service(443)}, want: "False", reason: "EndpointsNotFound",
			message: `cannot find endpointslices for service/api in "ext"`},
		{name: "endpoint not ready", b: backends{svc: service(443), slices: []*discoveryv1.EndpointSlice{slice("https", x.port, false)}},
			want: "False", reason: "MissingEndpoints", message: `endpointslices for service/api in "ext" have no addresses with port name "https"`},
		{name: "another port name", b: backends{svc: service(443), slices: []*discoveryv1.EndpointSlice{slice("metrics", x.port, true)}},
			want: "False", reason: "MissingEndpoints", message: `endpointslices for service/api in "ext" have no addresses with port name "https"`},
		{name: "unresolvable", b: backends{svc: service(443), slices: []*discoveryv1.EndpointSlice{slice("https", x.port, true)}, resolve: errors.New("no route")},
			cert: true, want: "False", reason: "FailedDiscoveryCheck", message: "no route"},
		{name: "no front-proxy certificate", b: backends{svc: service(443), slices: []*discoveryv1.EndpointSlice{slice("https", x.port, true)}, to: to},
			want: "False", reason: "FailedDiscoveryCheck", message: "failing or missing response from " + x.srv.URL + "/apis/ext.example.com/v1"},
		{name: "discovery answers 503", b: backends{svc: service(443), slices: []*discoveryv1.EndpointSlice{slice("https", x.port, true)}, to: to},
			cert: true, status: http.StatusServiceUnavailable, want: "False", reason: "FailedDiscoveryCheck",
			message: "failing or missing response from " + x.srv.URL + "/apis/ext.example.com/v1: bad status from " + x.srv.URL + "/apis/ext.example.com/v1: 503"},
		{name: "passed", b: backends{svc: service(443), slices: []*discoveryv1.EndpointSlice{slice("https", x.port, true)}, to: to},
			cert: true, want: "True", reason: "Passed", message: "all checks passed"},
		{name: "external name: no endpoints needed", b: backends{svc: external, to: to},
			cert: true, want: "True", reason: "Passed", message: "all checks passed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Store: &storage.Store{}, Etcd: noWatcher{}, Registry: reg, Backends: &tc.b, Logger: storagetest.Logger(t),
				Metrics: prometheus.NewRegistry(), Timeout: 5 * time.Second}
			if tc.cert {
				cfg.CertPEM, cfg.KeyPEM = x.clientCert, x.clientKey
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			x.setStatus(cmp.Or(tc.status, http.StatusOK))
			got := c.check(t.Context(), apiService(x))
			if got.Type != apiregistrationv1.Available || got.Status != tc.want || got.Reason != tc.reason || !strings.HasPrefix(got.Message, tc.message) {
				t.Errorf("got %s=%s %s %q, want %s %s %q", got.Type, got.Status, got.Reason, got.Message, tc.want, tc.reason, tc.message)
			}
			if tc.want == "True" {
				h := x.lastSeen()
				if h.Get("X-Remote-User") != "system:kube-aggregator" || h.Get("X-Remote-Group") != "system:masters" {
					t.Errorf("the check came as %q in %q, want system:kube-aggregator in system:masters", h.Get("X-Remote-User"), h.Values("X-Remote-Group"))
				}
			}
		})
	}
}

// noWatcher is the etcd watcher of a controller that never runs.
type noWatcher struct{ clientv3.Watcher }

// TestController: the condition follows the extension server in etcd
// through the gateway's own resolver (aggregator routing to an
// EndpointSlice on 127.0.0.1), with upstream's metrics; a deleted
// APIService leaves the gauge.
func TestController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	storagetest.CheckGoroutines(t)
	x := startExtension(t)
	cli := storagetest.StartEtcd(t)
	log := storagetest.Logger(t)
	b, err := backend.Open(backend.Config{Etcd: cli, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	metrics := prometheus.NewRegistry()
	agg := aggregator.Config{EnableAggregatorRouting: true, AllowLoopback: true}
	c, err := New(Config{
		Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Backends: agg.Resolver(b.Registry, b.Store),
		CertPEM: x.clientCert, KeyPEM: x.clientKey, Logger: log, Metrics: metrics,
		Resync: 50 * time.Millisecond, Backoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	lookup := func(r schema.GroupVersionResource) *registry.Resource {
		res, ok := b.Registry.Lookup(r)
		if !ok {
			t.Fatalf("%s not served", r)
		}
		return res
	}
	res := lookup(apiServicesGVR)
	create := func(r schema.GroupVersionResource, obj runtime.Object) {
		t.Helper()
		if _, err := b.Store.Create(ctx, lookup(r), obj); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(r schema.GroupVersionResource, ns, name string) {
		t.Helper()
		if _, _, err := b.Store.Delete(ctx, lookup(r), ns, name, storage.Preconditions{}, func(runtime.Object) (runtime.Object, storage.DeleteAction, error) {
			return nil, storage.DeleteRemove, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	reason := func(want string) {
		t.Helper()
		storagetest.Eventually(t, 20*time.Second, "APIService v1.ext.example.com "+want, func() error {
			obj, err := b.Store.Get(ctx, res, "", "v1.ext.example.com", 0)
			if err != nil {
				return err
			}
			cond := helper.GetAPIServiceConditionByType(obj.(*apiregistrationv1.APIService), apiregistrationv1.Available)
			if cond == nil || cond.Reason != want {
				return errors.New("condition " + strings.TrimSpace(strings.ReplaceAll(toString(cond), "\n", " ")))
			}
			return nil
		})
	}

	rctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(rctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	s := apiService(x)
	s.UID, s.ResourceVersion = "", ""
	create(apiServicesGVR, s)
	reason("ServiceNotFound")
	create(servicesGVR, service(443))
	reason("EndpointsNotFound")
	create(slicesGVR, slice("https", x.port, true))
	reason("Passed")
	// The metrics are set once the pass has written the condition.
	metric := func(what string, m prometheus.Collector, want float64) {
		t.Helper()
		storagetest.Eventually(t, 20*time.Second, what, func() error {
			if got := testutil.ToFloat64(m); got != want {
				return fmt.Errorf("%v, want %v", got, want)
			}
			return nil
		})
	}
	metric("aggregator_unavailable_apiservice 0 while Passed", c.unavailable.WithLabelValues("v1.ext.example.com"), 0)

	// The server stops answering: the next resync finds it.
	x.setStatus(http.StatusInternalServerError)
	reason("FailedDiscoveryCheck")
	metric("aggregator_unavailable_apiservice 1 once failed", c.unavailable.WithLabelValues("v1.ext.example.com"), 1)
	metric("aggregator_unavailable_apiservice_total counts the failure", c.unavailableTotal.WithLabelValues("v1.ext.example.com", "FailedDiscoveryCheck"), 1)
	x.setStatus(http.StatusOK)
	reason("Passed")

	remove(servicesGVR, "ext", "api")
	reason("ServiceNotFound")
	remove(apiServicesGVR, "", "v1.ext.example.com")
	storagetest.Eventually(t, 20*time.Second, "the deleted APIService out of the gauge", func() error {
		if n := testutil.CollectAndCount(c.unavailable); n != 0 {
			return errors.New(strconv.Itoa(n) + " series")
		}
		return nil
	})
}

func toString(c *apiregistrationv1.APIServiceCondition) string {
	if c == nil {
		return "none"
	}
	return string(c.Status) + " " + c.Reason + ": " + c.Message
}
