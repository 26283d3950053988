package fakekubelet

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one parsed sample: its value and timestamp (Unix ms).
type sample struct {
	value float64
	ms    int64
}

// parse reads the Prometheus text format into family → labels → sample,
// labels written as name=value pairs joined by commas.
func parse(t *testing.T, r io.Reader) map[string]map[string]sample {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	got := map[string]map[string]sample{}
	for name, f := range fams {
		got[name] = map[string]sample{}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			default:
				t.Fatalf("%s: type %v, want counter or gauge", name, f.GetType())
			}
			got[name][strings.Join(labels, ",")] = sample{v, m.GetTimestampMs()}
		}
	}
	return got
}

// TestResourceMetrics: /metrics/resource as the kubelet writes it — CPU
// counters growing at the configured rates from each container's start
// (continuously across a change of rate), memory as configured, pods the
// sums of their containers, every sample stamped with the scrape's
// millisecond, the value computed at that millisecond.
func TestResourceMetrics(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0.Add(-time.Minute) // the kubelet starts a minute before
	m := newMeter(func() time.Time { return now })
	at := func(d time.Duration) { now = t0.Add(d) }

	const mi, gi = 1 << 20, 1 << 30
	scrape := func() map[string]map[string]sample {
		var b bytes.Buffer
		if err := m.writeTo(&b); err != nil {
			t.Fatal(err)
		}
		return parse(t, &b)
	}
	type want struct {
		family, labels string
		value          float64
	}
	check := func(what string, got map[string]map[string]sample, ms int64, wants []want) {
		t.Helper()
		for _, w := range wants {
			s, ok := got[w.family][w.labels]
			if !ok {
				t.Errorf("%s: no %s{%s}", what, w.family, w.labels)
				continue
			}
			if s.value != w.value || s.ms != ms {
				t.Errorf("%s: %s{%s} = %v @%d, want %v @%d", what, w.family, w.labels, s.value, s.ms, w.value, ms)
			}
		}
		// The kubelet's scrape result carries no timestamp.
		if s, ok := got["resource_scrape_error"][""]; !ok || s != (sample{}) {
			t.Errorf("%s: resource_scrape_error %+v (found %v), want 0 without timestamp", what, s, ok)
		}
		n := 0
		for _, f := range got {
			n += len(f)
		}
		if n != len(wants)+1 {
			t.Errorf("%s: %d samples, want %d: %v", what, n, len(wants), got)
		}
	}
	const main, side, web = "container=main,namespace=a,pod=app", "container=side,namespace=a,pod=app", "container=nginx,namespace=b,pod=web"
	const app, webPod = "namespace=a,pod=app", "namespace=b,pod=web"
	sec := func(d time.Duration) float64 { return float64(t0.Add(d).UnixMilli()) / 1e3 }

	check("nothing configured", scrape(), t0.Add(-time.Minute).UnixMilli(), []want{
		{"node_cpu_usage_seconds_total", "", 0},
		{"node_memory_working_set_bytes", "", 0},
	})

	at(0)
	m.set(Usage{NodeCPU: 1.5, NodeMemory: 2 * gi, Containers: []ContainerUsage{
		{Namespace: "a", Pod: "app", Container: "main", CPU: 0.25, Memory: 64 * mi},
		{Namespace: "a", Pod: "app", Container: "side", CPU: 0.125, Memory: 16 * mi},
	}})
	// Sub-millisecond time is cut off: the value is the one at the
	// printed millisecond.
	at(10*time.Second + 700*time.Microsecond)
	check("10s on", scrape(), t0.Add(10*time.Second).UnixMilli(), []want{
		{"container_cpu_usage_seconds_total", main, 2.5},
		{"container_cpu_usage_seconds_total", side, 1.25},
		{"container_memory_working_set_bytes", main, 64 * mi},
		{"container_memory_working_set_bytes", side, 16 * mi},
		{"container_start_time_seconds", main, sec(0)},
		{"container_start_time_seconds", side, sec(0)},
		{"pod_cpu_usage_seconds_total", app, 3.75},
		{"pod_memory_working_set_bytes", app, 80 * mi},
		{"node_cpu_usage_seconds_total", "", 15},
		{"node_memory_working_set_bytes", "", 2 * gi},
	})

	// main doubles its rate, side stops, nginx starts.
	at(10 * time.Second)
	m.set(Usage{NodeCPU: 1, NodeMemory: gi, Containers: []ContainerUsage{
		{Namespace: "a", Pod: "app", Container: "main", CPU: 0.5, Memory: 32 * mi},
		{Namespace: "b", Pod: "web", Container: "nginx", CPU: 1, Memory: 128 * mi},
	}})
	at(20*time.Second + 500*time.Millisecond)
	check("after the change", scrape(), t0.Add(20*time.Second+500*time.Millisecond).UnixMilli(), []want{
		{"container_cpu_usage_seconds_total", main, 2.5 + 0.5*10.5},
		{"container_cpu_usage_seconds_total", web, 10.5},
		{"container_memory_working_set_bytes", main, 32 * mi},
		{"container_memory_working_set_bytes", web, 128 * mi},
		{"container_start_time_seconds", main, sec(0)},
		{"container_start_time_seconds", web, sec(10 * time.Second)},
		{"pod_cpu_usage_seconds_total", app, 2.5 + 0.5*10.5},
		{"pod_cpu_usage_seconds_total", webPod, 10.5},
		{"pod_memory_working_set_bytes", app, 32 * mi},
		{"pod_memory_working_set_bytes", webPod, 128 * mi},
		{"node_cpu_usage_seconds_total", "", 15 + 10.5},
		{"node_memory_working_set_bytes", "", gi},
	})
}

// TestResourceMetricsHTTPS: the kubelet serves the metrics to a client
// with the API server's kubelet client certificate, in the text format's
// content type, at the current time.
func TestResourceMetricsHTTPS(t *testing.T) {
	pki, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, err := Start(pki)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	k.SetUsage(Usage{NodeCPU: 2, NodeMemory: 1 << 30, Containers: []ContainerUsage{
		{Namespace: "default", Pod: "app", Container: "main", CPU: 0.25, Memory: 64 << 20},
	}})

	cert, err := tls.LoadX509KeyPair(pki.ClientCertFile, pki.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots},
	}}
	defer client.CloseIdleConnections()

	before := time.Now().UnixMilli()
	resp, err := client.Get("https://127.0.0.1:" + strconv.Itoa(k.Port()) + "/metrics/resource")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	after := time.Now().UnixMilli()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); expfmt.ResponseFormat(resp.Header).FormatType() != expfmt.TypeTextPlain {
		t.Errorf("content type %q, want the text format", ct)
	}
	got := parse(t, resp.Body)
	const labels = "container=main,namespace=default,pod=app"
	cpu, start := got["container_cpu_usage_seconds_total"][labels], got["container_start_time_seconds"][labels]
	if cpu.ms < before || cpu.ms > after {
		t.Errorf("container CPU @%d, want @[%d, %d]", cpu.ms, before, after)
	}
	// A quarter of a core since the container started.
	if want := 0.25 * float64(cpu.ms-int64(math.Round(start.value*1e3))) / 1e3; start.value < 1e9 || math.Abs(cpu.value-want) > 1e-9 {
		t.Errorf("container CPU %v, started at %v, want %v", cpu.value, start.value, want)
	}
	if mem := got["container_memory_working_set_bytes"][labels]; mem.value != 64<<20 || mem.ms != cpu.ms {
		t.Errorf("container memory %v @%d, want %v @%d", mem.value, mem.ms, 64<<20, cpu.ms)
	}
	if mem := got["node_memory_working_set_bytes"][""]; mem.value != 1<<30 {
		t.Errorf("node memory %v, want %v", mem.value, 1<<30)
	}
	if got := k.Requests(); len(got) != 1 || got[0].Path != "/metrics/resource" || got[0].ClientCN != "kube-apiserver-kubelet-client" {
		t.Errorf("the kubelet saw %+v", got)
	}
}
