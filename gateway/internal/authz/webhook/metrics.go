package webhook

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the webhook authorizer: every call made (retries each count),
// by HTTP status code or "<error>" when none came back (kube-apiserver's
// apiserver_delegated_authz_request_total and _duration_seconds).
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the webhook authorizer's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_gateway_authorization_webhook_requests_total",
			Help: "Calls to the authorization webhook, by HTTP status code (\"<error>\": no answer).",
		}, []string{"code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgate_gateway_authorization_webhook_request_duration_seconds",
			Help:    "Latency of calls to the authorization webhook, by HTTP status code.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"code"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register authorization webhook metrics: %w", err)
		}
	}
	return m, nil
}

// observe records one call; m may be nil.
func (m *Metrics) observe(code string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(code).Inc()
	m.latency.WithLabelValues(code).Observe(d.Seconds())
}
