package watchhub

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a hub.
type Metrics struct {
	events    *prometheus.CounterVec
	repairs   *prometheus.CounterVec
	backlog   *prometheus.GaugeVec
	watchers  prometheus.Gauge
	overflows prometheus.Counter
	catchups  prometheus.Counter

	progressRequests *prometheus.CounterVec
}

// NewMetrics registers the hub's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_gateway_watch_feed_events_total", Help: "Events dispatched by the gateway's range feeds.",
		}, []string{"range"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_gateway_watch_feed_repairs_total", Help: "Window reads made to fill a feed's gaps.",
		}, []string{"range"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_gateway_watch_feed_backlog", Help: "NATS messages waiting in a range feed.",
		}, []string{"range"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kgate_gateway_watchers", Help: "Open watches on this gateway.",
		}),
		overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_gateway_watcher_overflows_total", Help: "Times a slow watcher was detached to catch up from the window.",
		}),
		catchups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_gateway_watcher_catchups_total", Help: "Window reads made for watchers joining behind their feed.",
		}),
		progressRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_gateway_watch_progress_requests_total", Help: "Progress requests sent to a range's primary for merged watches waiting on the range.",
		}, []string{"range"}),
	}
	for _, c := range []prometheus.Collector{m.events, m.repairs, m.backlog, m.watchers, m.overflows, m.catchups, m.progressRequests} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register watch hub metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) observeBacklog(rangeID string, n int) {
	m.backlog.WithLabelValues(rangeID).Set(float64(n))
}
