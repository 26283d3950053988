// Package reqmetrics counts and times the gateway's requests under
// kube-apiserver's names (apiserver_request_total,
// apiserver_request_duration_seconds) and serves /metrics.
package reqmetrics

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

// Metrics are the gateway's request metrics, named as kube-apiserver's.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	handler  fasthttp.RequestHandler
}

// New registers the metrics on reg; g is what /metrics serves.
func New(reg prometheus.Registerer, g prometheus.Gatherer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, group, version, resource, subresource, scope and component.",
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register gateway metrics: %w", err)
		}
	}
	m.handler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return m, nil
}

func scope(info *requestinfo.Info) string {
	switch {
	case !info.IsResourceRequest:
		return ""
	case info.Namespace != "":
		return "namespace"
	case info.Name != "":
		return "resource"
	}
	return "cluster"
}

// Observe counts a request answered with code after d (watches are
// counted, not timed).
func (m *Metrics) Observe(info *requestinfo.Info, code int, d time.Duration) {
	verb := strings.ToUpper(info.Verb)
	if verb == "" {
		verb = "GET"
	}
	res := info.Resource
	m.requests.WithLabelValues(verb, info.APIGroup, info.APIVersion, res, info.Subresource, scope(info), "apiserver", strconv.Itoa(code)).Inc()
	if verb != "WATCH" {
		m.duration.WithLabelValues(verb, info.APIGroup, info.APIVersion, res, info.Subresource, scope(info), "apiserver").Observe(d.Seconds())
	}
}

// Serve answers /metrics.
func (m *Metrics) Serve(rc *fasthttp.RequestCtx) { m.handler(rc) }
