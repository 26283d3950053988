// Package target is one Kubernetes API server under test: its kubeconfig,
// client-go clients for JSON and protobuf, the local processes whose CPU
// and memory are sampled, and where its heap metric is read.
package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kgate/kgate/bench/internal/procstat"
	"github.com/kgate/kgate/bench/internal/promtext"
)

// Content types for rest.Config.
const (
	JSON     = "application/json"
	Protobuf = "application/vnd.kubernetes.protobuf"
)

// HeapMetric is the Go heap figure read from /metrics.
const HeapMetric = "go_memstats_heap_inuse_bytes"

// Config describes a target.
type Config struct {
	// Name labels the target in reports (e.g. "kgate", "kube-apiserver").
	Name string
	// Kubeconfig is the path of the kubeconfig; Context picks one of its
	// contexts (default: current).
	Kubeconfig string
	Context    string
	// Pids are local processes of the server whose CPU and RSS are
	// sampled (optional).
	Pids []int
	// MetricsURL is where the cache's heap metric is scraped: empty reads
	// the API server's own /metrics through the kubeconfig; an http(s)
	// URL reads that instead (a separate cache node's --metrics-address).
	MetricsURL string
	// MaxConns bounds idle connections kept per host (default 512), so
	// a high concurrency does not churn HTTP/1.1 connections.
	MaxConns int
}

// Target is an opened API server.
type Target struct {
	Name string
	// Config is the rest config with client-side rate limits lifted.
	Config *rest.Config
	// JSON and Proto speak JSON and protobuf respectively.
	JSON, Proto *kubernetes.Clientset
	Pids        []int
	metricsURL  string
}

// Open builds clients for cfg.
func Open(cfg Config) (*Target, error) {
	if cfg.Kubeconfig == "" {
		return nil, errors.New("target: kubeconfig is required")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 512
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: cfg.Context},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	// The harness measures the server: no client-side throttling.
	rc.QPS, rc.Burst = 1e6, 1e6
	rc.UserAgent = "kgate-bench"
	if err := widenTransport(rc, cfg.MaxConns); err != nil {
		return nil, err
	}
	t := &Target{Name: cfg.Name, Config: rc, Pids: cfg.Pids, metricsURL: cfg.MetricsURL}
	if t.JSON, err = Clientset(rc, JSON); err != nil {
		return nil, err
	}
	if t.Proto, err = Clientset(rc, Protobuf); err != nil {
		return nil, err
	}
	return t, nil
}

// Clientset is a typed client sending and accepting contentType.
func Clientset(rc *rest.Config, contentType string) (*kubernetes.Clientset, error) {
	c := rest.CopyConfig(rc)
	c.ContentType = contentType
	c.AcceptContentTypes = contentType
	if contentType == Protobuf {
		c.AcceptContentTypes = Protobuf + "," + JSON
	}
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("cannot build %s client: %w", contentType, err)
	}
	return cs, nil
}

// Separate is a typed client speaking contentType over connections of its
// own: kube-apiserver multiplexes a clientset's requests over one HTTP/2
// connection, so distinct clients (kubelets, controllers on other hosts)
// are modelled by one Separate each. closeIdle drops its idle connections.
func (t *Target) Separate(contentType string) (cs *kubernetes.Clientset, closeIdle func(), err error) {
	rc := rest.CopyConfig(t.Config)
	closeIdle = func() {}
	if tr, ok := rc.Transport.(*http.Transport); ok {
		own := tr.Clone()
		rc.Transport = own
		closeIdle = own.CloseIdleConnections
	} else {
		// client-go shares a transport between configs with the same TLS
		// settings unless they carry a dialer of their own.
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		rc.Dial = d.DialContext
	}
	cs, err = Clientset(rc, contentType)
	if err != nil {
		return nil, nil, err
	}
	return cs, closeIdle, nil
}

// widenTransport replaces client-go's transport (25 idle connections per
// host) by one keeping maxConns, with the same TLS and HTTP/2.
func widenTransport(rc *rest.Config, maxConns int) error {
	if rc.Transport != nil || rc.ExecProvider != nil || rc.AuthProvider != nil {
		return nil // leave custom and plugin-based auth alone
	}
	tlsCfg, err := rest.TLSConfigFor(rc)
	if err != nil {
		return fmt.Errorf("cannot build TLS config: %w", err)
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     tlsCfg,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if rc.Proxy != nil {
		tr.Proxy = rc.Proxy
	}
	rc.Transport = tr
	// The TLS settings now live in the transport; client-go refuses both.
	rc.TLSClientConfig = rest.TLSClientConfig{}
	return nil
}

// Version is the server's gitVersion ("" if it cannot tell).
func (t *Target) Version() string {
	v, err := t.JSON.Discovery().ServerVersion()
	if err != nil {
		return ""
	}
	return v.GitVersion
}

// Host is the server URL.
func (t *Target) Host() string { return t.Config.Host }

// Process samples the target's local processes; ok is false without pids
// or when they cannot be read.
func (t *Target) Process() (s procstat.Sample, ok bool) {
	if len(t.Pids) == 0 {
		return s, false
	}
	s, err := procstat.Sum(t.Pids)
	return s, err == nil
}

// Heap reads HeapMetric; ok is false when the server does not export it.
func (t *Target) Heap(ctx context.Context) (bytes float64, ok bool, err error) {
	body, err := t.Metrics(ctx)
	if err != nil {
		return 0, false, err
	}
	v, ok := promtext.Value(body, HeapMetric)
	return v, ok, nil
}

// Metrics returns the /metrics exposition (of MetricsURL when set).
func (t *Target) Metrics(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if t.metricsURL == "" {
		b, err := t.JSON.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("cannot read /metrics of %s: %w", t.Name, err)
		}
		return b, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", t.metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cannot read %s: %s", t.metricsURL, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// Ready polls /readyz until it answers ok or ctx ends.
func (t *Target) Ready(ctx context.Context) error {
	var last error
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		b, err := t.JSON.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		cancel()
		if err == nil && string(b) == "ok" {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("/readyz answered %q", b)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not ready: %w", t.Name, errors.Join(ctx.Err(), last))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
