package readapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the read API.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics makes the metrics and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_cachenode_requests_total", Help: "Read API requests, by verb (get, list, events, ready) and HTTP code.",
		}, []string{"verb", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kgate_cachenode_request_duration_seconds",
			Help:    "Read API request latency, waits for a revision included.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"verb"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency)
	}
	return m
}

func (m *Metrics) observe(verb string, code int, d time.Duration) {
	m.requests.WithLabelValues(verb, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(verb).Observe(d.Seconds())
}
