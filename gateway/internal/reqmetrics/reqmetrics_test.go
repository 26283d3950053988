package reqmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/gateway/internal/latency"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

func request(method, uri string) *fasthttp.RequestCtx {
	rc := &fasthttp.RequestCtx{}
	rc.Request.Header.SetMethod(method)
	rc.Request.SetRequestURI(uri)
	return rc
}

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return float64(m.GetHistogram().GetSampleCount())
}

func TestObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, reg); err == nil {
		t.Fatal("registered the metrics twice")
	}
	list := request("GET", "/api/v1/namespaces/ns/pods")
	list.Response.SetBody(make([]byte, 1500))
	m.Observe(list, &requestinfo.Info{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Resource: "pods", Namespace: "ns"}, 200, time.Millisecond)
	m.Observe(request("GET", "/api/v1/pods?watch=1"), &requestinfo.Info{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Resource: "pods"}, 200, time.Millisecond)
	m.Observe(nil, &requestinfo.Info{}, 400, 0) // unreadable: GET, no resource
	dry := &requestinfo.Info{IsResourceRequest: true, Verb: "create", APIVersion: "v1", Resource: "pods", Namespace: "ns"}
	m.Observe(request("POST", "/api/v1/namespaces/ns/pods?dryRun=All&dryRun=All"), dry, 201, time.Millisecond)
	m.Observe(request("POST", "/api/v1/namespaces/ns/pods?dryRun=Some"), dry, 400, time.Millisecond)

	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"LIST", "", "", "v1", "pods", "", "namespace", "apiserver", "200"}, 1},
		{[]string{"WATCH", "", "", "v1", "pods", "", "cluster", "apiserver", "200"}, 1},
		{[]string{"GET", "", "", "", "", "", "", "apiserver", "400"}, 1},
		{[]string{"POST", "All", "", "v1", "pods", "", "resource", "apiserver", "201"}, 1},
		{[]string{"POST", "invalid", "", "v1", "pods", "", "resource", "apiserver", "400"}, 1},
	} {
		if got := counter(t, m.requests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("apiserver_request_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	// The SLI leaves out dry runs; response sizes are for GET and LIST.
	if got := counter(t, m.sli.WithLabelValues("POST", "", "v1", "pods", "", "resource", "apiserver").(prometheus.Histogram)); got != 0 {
		t.Errorf("dry runs in the SLI: %v", got)
	}
	var sz dto.Metric
	if err := m.sizes.WithLabelValues("LIST", "", "v1", "pods", "", "namespace", "apiserver").(prometheus.Histogram).Write(&sz); err != nil {
		t.Fatal(err)
	}
	if sz.GetHistogram().GetSampleSum() != 1500 {
		t.Errorf("LIST response size sum = %v, want 1500", sz.GetHistogram().GetSampleSum())
	}

	var rc fasthttp.RequestCtx
	m.Serve(&rc)
	for _, name := range []string{"apiserver_request_total", "apiserver_request_duration_seconds", "apiserver_request_sli_duration_seconds", "apiserver_response_sizes"} {
		if !strings.Contains(string(rc.Response.Body()), name) {
			t.Errorf("/metrics does not serve %s", name)
		}
	}
}

// The SLI latency is the request's time less what its tracker excluded.
func TestSLIExcludesTrackedTime(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	rc := request("POST", "/api/v1/namespaces/ns/configmaps")
	latency.Start(rc).Add(700 * time.Millisecond)
	m.Observe(rc, &requestinfo.Info{IsResourceRequest: true, Verb: "create", APIVersion: "v1", Resource: "configmaps", Namespace: "ns"}, 201, time.Second)
	for _, c := range []struct {
		h    *prometheus.HistogramVec
		want float64
	}{{m.sli, 0.3}, {m.duration, 1}} {
		var d dto.Metric
		labels := []string{"POST", "", "v1", "configmaps", "", "resource", "apiserver"}
		if c.h == m.duration {
			labels = []string{"POST", "", "", "v1", "configmaps", "", "resource", "apiserver"}
		}
		if err := c.h.WithLabelValues(labels...).(prometheus.Histogram).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetHistogram().GetSampleSum(); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("sum = %v, want %v", got, c.want)
		}
	}
}

// The verb and scope labels follow kube-apiserver's CleanVerb and
// CleanScope.
func TestVerbAndScope(t *testing.T) {
	for _, c := range []struct {
		method, uri, contentType string
		info                     requestinfo.Info
		verb, scope              string
	}{
		{"GET", "/api/v1/namespaces/a/pods/p", "", requestinfo.Info{IsResourceRequest: true, Verb: "get", Namespace: "a", Resource: "pods", Name: "p"}, "GET", "resource"},
		{"GET", "/api/v1/namespaces/a/pods", "", requestinfo.Info{IsResourceRequest: true, Verb: "list", Namespace: "a", Resource: "pods"}, "LIST", "namespace"},
		{"GET", "/api/v1/pods", "", requestinfo.Info{IsResourceRequest: true, Verb: "list", Resource: "pods"}, "LIST", "cluster"},
		{"GET", "/api/v1/watch/pods", "", requestinfo.Info{IsResourceRequest: true, Verb: "watch", Resource: "pods"}, "WATCH", "cluster"},
		{"POST", "/api/v1/namespaces/a/pods", "", requestinfo.Info{IsResourceRequest: true, Verb: "create", Namespace: "a", Resource: "pods"}, "POST", "resource"},
		{"PUT", "/api/v1/namespaces/a/pods/p", "", requestinfo.Info{IsResourceRequest: true, Verb: "update", Namespace: "a", Resource: "pods", Name: "p"}, "PUT", "resource"},
		{"PATCH", "/api/v1/namespaces/a/pods/p", "application/apply-patch+yaml", requestinfo.Info{IsResourceRequest: true, Verb: "patch", Namespace: "a", Resource: "pods", Name: "p"}, "APPLY", "resource"},
		{"PATCH", "/api/v1/namespaces/a/pods/p", "application/merge-patch+json", requestinfo.Info{IsResourceRequest: true, Verb: "patch", Namespace: "a", Resource: "pods", Name: "p"}, "PATCH", "resource"},
		{"DELETE", "/api/v1/namespaces/a/pods", "", requestinfo.Info{IsResourceRequest: true, Verb: "deletecollection", Namespace: "a", Resource: "pods"}, "DELETE", "namespace"},
		{"POST", "/api/v1/namespaces/a/pods/p/exec", "", requestinfo.Info{IsResourceRequest: true, Verb: "create", Namespace: "a", Resource: "pods", Subresource: "exec", Name: "p"}, "CONNECT", "resource"},
		{"GET", "/version", "", requestinfo.Info{Verb: "get"}, "GET", ""},
		{"OPTIONS", "/api", "", requestinfo.Info{Verb: "options"}, "other", ""},
	} {
		rc := request(c.method, c.uri)
		if c.contentType != "" {
			rc.Request.Header.SetContentType(c.contentType)
		}
		sc := c.info.Scope()
		if got := verb(rc, &c.info, sc); got != c.verb || sc != c.scope {
			t.Errorf("%s %s: verb, scope = %q, %q; want %q, %q", c.method, c.uri, got, sc, c.verb, c.scope)
		}
	}
}
