// Package reqmetrics counts and times the gateway's requests under
// kube-apiserver's names and labels (apiserver_request_total,
// apiserver_request_duration_seconds, apiserver_request_sli_duration_seconds,
// apiserver_response_sizes), so that kube-apiserver's dashboards and SLO
// rules work unchanged, and serves /metrics.
package reqmetrics

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/gateway/internal/latency"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

// Metrics are the gateway's request metrics, named as kube-apiserver's.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	sli      *prometheus.HistogramVec
	sizes    *prometheus.HistogramVec
	handler  fasthttp.RequestHandler
}

// latencyBuckets are kube-apiserver's for its request latencies; the SLI
// histogram starts at its second bucket as upstream's does.
var latencyBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// New registers the metrics on reg; g is what /metrics serves.
func New(reg prometheus.Registerer, g prometheus.Gatherer) (*Metrics, error) {
	labels := []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}
	withDryRun := []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, append(slices.Clone(withDryRun), "code")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: latencyBuckets,
		}, withDryRun),
		sli: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_sli_duration_seconds",
			Help:    "Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
			Buckets: latencyBuckets[2:],
		}, labels),
		sizes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_response_sizes",
			Help:    "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
			Buckets: prometheus.ExponentialBuckets(1000, 10, 7),
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.sli, m.sizes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register gateway metrics: %w", err)
		}
	}
	m.handler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return m, nil
}

// dryRun is the dry_run label as kube-apiserver reports it: the request's
// dryRun values sorted and deduplicated, "invalid" for a value other than
// All, "" without one.
func dryRun(q *fasthttp.Args) string {
	vs := q.PeekMulti("dryRun")
	if len(vs) == 0 {
		return ""
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if string(v) != metav1.DryRunAll {
			return "invalid"
		}
		out = append(out, string(v))
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

// verb is the verb label as kube-apiserver reports it: the HTTP method,
// LIST for a GET of a collection, WATCH, APPLY for a server-side apply,
// CONNECT for the connect subresources, "other" for anything else.
func verb(rc *fasthttp.RequestCtx, info *requestinfo.Info, scope string) string {
	method := "GET"
	if rc != nil {
		method = strings.ToUpper(string(rc.Method()))
	}
	switch {
	case info.Verb == "watch":
		return "WATCH"
	case info.IsResourceRequest && connectSubresource(info.Subresource):
		return "CONNECT"
	case method == fasthttp.MethodGet || method == fasthttp.MethodHead:
		if scope != "resource" && scope != "" {
			return "LIST"
		}
		return "GET"
	case method == fasthttp.MethodPatch && rc != nil && string(rc.Request.Header.ContentType()) == string(types.ApplyPatchType):
		return "APPLY"
	case method == fasthttp.MethodPost, method == fasthttp.MethodPut, method == fasthttp.MethodPatch, method == fasthttp.MethodDelete:
		return method
	}
	return "other"
}

func connectSubresource(sub string) bool {
	switch sub {
	case "log", "exec", "portforward", "attach", "proxy":
		return true
	}
	return false
}

// Observe counts and times a request answered with code after d. A request
// handed to a hijacked stream (a watch, an upgrade) is counted and timed
// when it starts, with d the time to start it; its life is in
// apiserver_longrunning_requests. rc may be nil for a request that could
// not be read.
func (m *Metrics) Observe(rc *fasthttp.RequestCtx, info *requestinfo.Info, code int, d time.Duration) {
	sc := info.Scope()
	verb := verb(rc, info, sc)
	dry := ""
	if rc != nil {
		dry = dryRun(rc.QueryArgs())
	}
	g, v, res, sub := info.APIGroup, info.APIVersion, info.Resource, info.Subresource
	m.requests.WithLabelValues(verb, dry, g, v, res, sub, sc, "apiserver", strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(verb, dry, g, v, res, sub, sc, "apiserver").Observe(d.Seconds())
	if rc == nil {
		return
	}
	if dry == "" && !rc.Hijacked() {
		sli := d - latency.From(rc).Excluded()
		m.sli.WithLabelValues(verb, g, v, res, sub, sc, "apiserver").Observe(max(sli, 0).Seconds())
	}
	if verb == "GET" || verb == "LIST" {
		m.sizes.WithLabelValues(verb, g, v, res, sub, sc, "apiserver").Observe(float64(len(rc.Response.Body())))
	}
}

// Serve answers /metrics.
func (m *Metrics) Serve(rc *fasthttp.RequestCtx) { m.handler(rc) }
