package publisher

import "github.com/prometheus/client_golang/prometheus"

// Metrics of a publisher, labelled by range.
type Metrics struct {
	published *prometheus.CounterVec
	errors    *prometheus.CounterVec
	requests  *prometheus.CounterVec
}

// NewMetrics makes the metrics and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_cachenode_published_total", Help: "Messages published on NATS, by range and kind (event, progress).",
		}, []string{"range", "kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_cachenode_publish_errors_total", Help: "Messages that could not be published on NATS.",
		}, []string{"range"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_cachenode_progress_requests_total", Help: "Progress requests from gateways handled by the range's primary.",
		}, []string{"range"}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.errors, m.requests)
	}
	return m
}

type rangeMetrics struct {
	events, progress, errors, requests prometheus.Counter
}

func (m *Metrics) forRange(id string) rangeMetrics {
	return rangeMetrics{
		events:   m.published.WithLabelValues(id, "event"),
		progress: m.published.WithLabelValues(id, "progress"),
		errors:   m.errors.WithLabelValues(id),
		requests: m.requests.WithLabelValues(id),
	}
}
