package rest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

// Metrics are the handlers' metrics: kgate's own and, where the meaning
// is kube-apiserver's, its names and labels (long-running requests, watch
// events and their sizes).
type Metrics struct {
	listRanges  prometheus.Histogram
	longRunning *prometheus.GaugeVec
	watchEvents *prometheus.CounterVec
	watchSizes  *prometheus.HistogramVec
}

// NewMetrics registers the handlers' metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gvr := []string{"group", "version", "resource"}
	m := &Metrics{
		listRanges: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kgate_gateway_list_ranges",
			Help:    "Ranges (cache node reads) one list page was gathered from.",
			Buckets: []float64{1, 2, 4, 8, 16, 32},
		}),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
		watchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_events_total",
			Help: "Number of events sent in watch clients",
		}, gvr),
		watchSizes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_watch_events_sizes",
			Help:    "Watch event size distribution in bytes",
			Buckets: prometheus.ExponentialBuckets(1024, 2, 8),
		}, gvr),
	}
	for _, c := range []prometheus.Collector{m.listRanges, m.longRunning, m.watchEvents, m.watchSizes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register REST metrics: %w", err)
		}
	}
	return m, nil
}

// longRunningWatch counts a watch in apiserver_longrunning_requests until the
// returned func is called.
func (m *Metrics) longRunningWatch(info *requestinfo.Info) func() {
	if m == nil {
		return func() {}
	}
	g := m.longRunning.WithLabelValues("WATCH", info.APIGroup, info.APIVersion, info.Resource, info.Subresource, info.Scope(), "apiserver")
	g.Inc()
	return g.Dec
}

// eventCounter counts the events one watch sends; resolved once per watch
// so that the fan-out pays two atomic adds per event.
type eventCounter struct {
	n     prometheus.Counter
	sizes prometheus.Observer
}

func (m *Metrics) watchCounter(info *requestinfo.Info) eventCounter {
	if m == nil {
		return eventCounter{}
	}
	return eventCounter{
		n:     m.watchEvents.WithLabelValues(info.APIGroup, info.APIVersion, info.Resource),
		sizes: m.watchSizes.WithLabelValues(info.APIGroup, info.APIVersion, info.Resource),
	}
}

// sent records one event of size bytes.
func (c eventCounter) sent(size int) {
	if c.n != nil {
		c.n.Inc()
		c.sizes.Observe(float64(size))
	}
}
