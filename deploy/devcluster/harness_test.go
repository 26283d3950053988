package devcluster_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apfbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/deploy/pki"
)

// The integration tests share one cluster (started on first use, closed by
// TestMain) and never run in parallel: each uses its own namespace, and the
// error tests compare the whole etcd keyspace before and after a request.
var shared struct {
	once sync.Once
	c    *devcluster.Cluster
	dir  string
	err  error
}

// internal holds the internal plane's certificates, made once per test
// process and shared by the clusters startDev starts.
var internal struct {
	once sync.Once
	dir  string
	err  error
}

func sharedInternalDir() (string, error) {
	internal.once.Do(func() {
		if internal.dir, internal.err = os.MkdirTemp("", "kgate-internal-"); internal.err != nil {
			return
		}
		_, internal.err = pki.EnsureInternal(pki.InternalConfig{Dir: internal.dir})
	})
	return internal.dir, internal.err
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if internal.dir != "" {
		os.RemoveAll(internal.dir)
	}
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "cannot close the shared cluster:", err)
			code = 1
		}
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	if err := closeAuthCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot close the auth cluster:", err)
		code = 1
	}
	if err := closeAuthnCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot close the authn cluster:", err)
		code = 1
	}
	os.Exit(code)
}

// testLogger logs warnings and errors of the clusters (KGATE_TEST_LOG=debug
// for everything) to stderr.
func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("KGATE_TEST_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// freeAddr returns a loopback address with a port that was free a moment
// ago: devcluster writes the gateway's address into the kubeconfig and the
// serving certificate before it listens, so port 0 cannot be used.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startCluster starts a cluster keeping its data in dir.
func startCluster(dir string) (*devcluster.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: dir, UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
	})
	if err != nil {
		return nil, err
	}
	if err := waitBootstrapped(ctx, c.EtcdClient()); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// bootstrapKeys are the objects the leading gateway creates once after
// start, as kube-apiserver's post-start hooks do: API Priority and
// Fairness's suggested and mandatory configuration and the kubernetes
// Service's EndpointSlice.
func bootstrapKeys() []string {
	keys := []string{"/registry/endpointslices/default/kubernetes"}
	for _, fs := range append(slices.Clone(apfbootstrap.MandatoryFlowSchemas), apfbootstrap.SuggestedFlowSchemas...) {
		keys = append(keys, "/registry/flowschemas/"+fs.Name)
	}
	for _, plc := range append(slices.Clone(apfbootstrap.MandatoryPriorityLevelConfigurations), apfbootstrap.SuggestedPriorityLevelConfigurations...) {
		keys = append(keys, "/registry/prioritylevelconfigurations/"+plc.Name)
	}
	return keys
}

// waitBootstrapped returns once every bootstrap key is stored, so that
// tests that compare etcd before and after a request see no write of the
// start-up. It checks again after each batch of writes etcd reports.
func waitBootstrapped(ctx context.Context, etcd *clientv3.Client) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var events clientv3.WatchChan
	for {
		missing := ""
		var rev int64
		for _, k := range bootstrapKeys() {
			resp, err := etcd.Get(ctx, k, clientv3.WithCountOnly())
			if err != nil {
				return fmt.Errorf("cannot read %s: %w", k, err)
			}
			rev = resp.Header.Revision
			if resp.Count == 0 {
				missing = k
				break
			}
		}
		if missing == "" {
			return nil
		}
		if events == nil {
			events = etcd.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		}
		select {
		case resp, ok := <-events:
			if !ok || resp.Err() != nil {
				return fmt.Errorf("cannot wait for the bootstrap objects (%s missing): the watch ended", missing)
			}
		case <-ctx.Done():
			return fmt.Errorf("cannot wait for the bootstrap objects (%s missing): %w", missing, ctx.Err())
		}
	}
}

// startDev starts cfg on a free loopback port (cfg.Listen is ignored).
// Another test process may take the port between freeAddr and the
// gateway's listen: then it tries again on another port, with a data
// directory of its own (the first one's certificates and kubeconfig name
// the old address).
func startDev(ctx context.Context, cfg devcluster.Config) (*devcluster.Cluster, error) {
	if cfg.InternalDir == "" && !cfg.InsecureInternal {
		var err error
		if cfg.InternalDir, err = sharedInternalDir(); err != nil {
			return nil, err
		}
	}
	dir := cfg.DataDir
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if cfg.Listen, err = freeAddr(); err != nil {
			return nil, err
		}
		if attempt > 1 {
			cfg.DataDir = fmt.Sprintf("%s-%d", dir, attempt)
		}
		var c *devcluster.Cluster
		if c, err = devcluster.Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
	}
	return nil, err
}

// cluster returns the shared cluster; integration tests skip under -short.
func cluster(tb testing.TB) *devcluster.Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test: skipped under -short")
	}
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "kgate-devcluster-test-"); shared.err != nil {
			return
		}
		shared.c, shared.err = startCluster(shared.dir)
	})
	if shared.err != nil {
		tb.Fatalf("cannot start the shared cluster: %v", shared.err)
	}
	return shared.c
}

// wire records what went over the wire: one line per request.
type wire struct {
	mu    sync.Mutex
	lines []string
}

func (w *wire) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, s)
}

func (w *wire) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

type recordingTransport struct {
	w    *wire
	next http.RoundTripper
}

func (rt recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.next.RoundTrip(req)
	line := req.Method + " " + req.URL.RequestURI() + " accept=" + req.Header.Get("Accept") + " content-type=" + req.Header.Get("Content-Type")
	if err == nil {
		line += " -> " + strconv.Itoa(resp.StatusCode) + " " + resp.Header.Get("Content-Type")
	}
	rt.w.add(line)
	return resp, err
}

// restConfig is the admin config of c. With json set, the client speaks
// JSON; otherwise typed clients use their default (protobuf). A non-nil w
// records every request.
func restConfig(tb testing.TB, c *devcluster.Cluster, json bool, w *wire) *rest.Config {
	tb.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		tb.Fatalf("cannot load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.Timeout = 30 * time.Second
	if json {
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	}
	if w != nil {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{w: w, next: rt} }
	}
	return cfg
}

func clientset(tb testing.TB, c *devcluster.Cluster, json bool, w *wire) kubernetes.Interface {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(restConfig(tb, c, json, w))
	if err != nil {
		tb.Fatalf("cannot make clientset: %v", err)
	}
	return cs
}

// rawClient is an HTTPS client with the admin client certificate, for
// requests whose bodies and headers the test controls.
type rawClient struct {
	base string
	hc   *http.Client
}

func newRawClient(tb testing.TB, c *devcluster.Cluster) *rawClient {
	tb.Helper()
	cfg := restConfig(tb, c, true, nil)
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		tb.Fatalf("cannot make transport: %v", err)
	}
	return &rawClient{base: strings.TrimSuffix(cfg.Host, "/"), hc: &http.Client{Transport: rt, Timeout: 30 * time.Second}}
}

// do sends one request; headers are name/value pairs.
func (rc *rawClient) do(tb testing.TB, method, path string, body []byte, headers ...string) (*http.Response, []byte) {
	tb.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, rc.base+path, r)
	if err != nil {
		tb.Fatalf("cannot make request: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := rc.hc.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: cannot read body: %v", method, path, err)
	}
	return resp, data
}

var nsSeq atomic.Int64

// uniqueNS returns a namespace name not used before in this process, so
// that tests can run again (-count) against the shared cluster.
func uniqueNS(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, nsSeq.Add(1))
}

// ensureNamespace creates ns unless it exists.
func ensureNamespace(tb testing.TB, cs kubernetes.Interface, ns string) {
	tb.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("cannot create namespace %s: %v", ns, err)
	}
}

// etcdState is the whole keyspace: key → mod revision and value digest.
func etcdState(tb testing.TB, c *devcluster.Cluster) map[string]string {
	tb.Helper()
	resp, err := c.EtcdClient().Get(context.Background(), "/", clientv3.WithPrefix())
	if err != nil {
		tb.Fatalf("cannot read etcd: %v", err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		sum := sha256.Sum256(kv.Value)
		out[string(kv.Key)] = fmt.Sprintf("mod=%d create=%d ver=%d sha=%s", kv.ModRevision, kv.CreateRevision, kv.Version, hex.EncodeToString(sum[:8]))
	}
	return out
}

// etcdRevision is etcd's current revision.
func etcdRevision(tb testing.TB, c *devcluster.Cluster) int64 {
	tb.Helper()
	resp, err := c.EtcdClient().Get(context.Background(), "/registry/health-probe-none")
	if err != nil {
		tb.Fatalf("cannot read etcd: %v", err)
	}
	return resp.Header.Revision
}

// deleteRevision is the revision at which key was deleted after rev.
func deleteRevision(tb testing.TB, c *devcluster.Cluster, key string, after int64) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := c.EtcdClient().Watch(ctx, key, clientv3.WithRev(after+1))
	for resp := range wc {
		if err := resp.Err(); err != nil {
			tb.Fatalf("cannot watch %s: %v", key, err)
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return ev.Kv.ModRevision
			}
		}
	}
	tb.Fatalf("no delete of %s after %d", key, after)
	return 0
}

// requestCount sums the gateway's apiserver_request_total for verb and
// resource.
func requestCount(tb testing.TB, c *devcluster.Cluster, verb, resource string) float64 {
	tb.Helper()
	mfs, err := c.Registry.Gather()
	if err != nil {
		tb.Fatalf("cannot gather metrics: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "apiserver_request_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var v, r string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "verb":
					v = l.GetValue()
				case "resource":
					r = l.GetValue()
				}
			}
			if v == verb && r == resource {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// decodeStatus decodes a response body that must be a metav1.Status.
func decodeStatus(tb testing.TB, resp *http.Response, body []byte) *metav1.Status {
	tb.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("error Content-Type = %q, want application/json; body %q", ct, body)
	}
	var st metav1.Status
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		tb.Fatalf("error body is not a metav1.Status: %v: %q", err, body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure {
		tb.Errorf("error body kind=%q apiVersion=%q status=%q, want Status v1 Failure: %s", st.Kind, st.APIVersion, st.Status, body)
	}
	if int(st.Code) != resp.StatusCode {
		tb.Errorf("Status.code = %d, HTTP status %d", st.Code, resp.StatusCode)
	}
	return &st
}

// newAnonymousClient is a raw client that sends no credentials.
func newAnonymousClient(tb testing.TB, c *devcluster.Cluster) *rawClient {
	tb.Helper()
	cfg := tokenConfig(tb, c, "")
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		tb.Fatalf("cannot make transport: %v", err)
	}
	return &rawClient{base: strings.TrimSuffix(cfg.Host, "/"), hc: &http.Client{Transport: rt, Timeout: 30 * time.Second}}
}
