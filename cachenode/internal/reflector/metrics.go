package reflector

import (
	"github.com/kgate/kgate/cachenode/event"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of all reflectors of a node, labelled by range.
type Metrics struct {
	events       *prometheus.CounterVec
	relists      *prometheus.CounterVec
	decodeErrors *prometheus.CounterVec
	objects      *prometheus.GaugeVec
	bytes        *prometheus.GaugeVec
	windowEvents *prometheus.GaugeVec
	windowBytes  *prometheus.GaugeVec
	seen         *prometheus.GaugeVec
	lag          *prometheus.GaugeVec
	checks       *prometheus.CounterVec
	inconsistent *prometheus.CounterVec
	stalls       *prometheus.CounterVec
}

// NewMetrics makes the metrics and registers them on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	byRange := []string{"range"}
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_cachenode_events_total", Help: "Events applied, by range and type.",
		}, []string{"range", "type"}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_cachenode_relists_total", Help: "Relists after a compacted or cancelled watch.",
		}, byRange),
		decodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_cachenode_decode_errors_total", Help: "Stored values that could not be decoded and were skipped.",
		}, byRange),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_cachenode_store_objects", Help: "Objects in the store.",
		}, byRange),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_cachenode_store_bytes", Help: "Bytes of the objects in the store (JSON form).",
		}, byRange),
		windowEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_cachenode_window_events", Help: "Events in the window.",
		}, byRange),
		windowBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_cachenode_window_bytes", Help: "Bytes of the events in the window.",
		}, byRange),
		seen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_cachenode_seen_revision", Help: "Revision the range is complete up to.",
		}, byRange),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_cachenode_seen_lag_revisions", Help: "etcd's revision at the last watch response minus the seen revision.",
		}, byRange),
	}
	m.checks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kgate_cachenode_consistency_checks_total", Help: "Comparisons of a range's keys and mod revisions with etcd's at the same revision.",
	}, byRange)
	m.inconsistent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kgate_cachenode_inconsistencies_total", Help: "Consistency checks that found the range's cache different from etcd (each repaired by a relist).",
	}, byRange)
	m.stalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kgate_cachenode_watch_stalls_total", Help: "Watches of a range started again because etcd sent nothing (no event, no progress notification) for the stall timeout although progress was asked for.",
	}, byRange)
	if reg != nil {
		reg.MustRegister(m.events, m.relists, m.decodeErrors, m.objects, m.bytes, m.windowEvents, m.windowBytes, m.seen, m.lag, m.checks, m.inconsistent, m.stalls)
	}
	return m
}

// rangeMetrics are the metrics of one range, curried.
type rangeMetrics struct {
	events                                         [event.Progress + 1]prometheus.Counter
	relists, decodeErrors                          prometheus.Counter
	objects, bytes, windowEvents, windowBytes, lag prometheus.Gauge
	seen                                           prometheus.Gauge
	consistencyChecks, inconsistencies, stalls     prometheus.Counter
}

func (m *Metrics) forRange(id string) rangeMetrics {
	rm := rangeMetrics{
		relists:      m.relists.WithLabelValues(id),
		decodeErrors: m.decodeErrors.WithLabelValues(id),
		objects:      m.objects.WithLabelValues(id),
		bytes:        m.bytes.WithLabelValues(id),
		windowEvents: m.windowEvents.WithLabelValues(id),
		windowBytes:  m.windowBytes.WithLabelValues(id),
		seen:         m.seen.WithLabelValues(id),
		lag:          m.lag.WithLabelValues(id),

		consistencyChecks: m.checks.WithLabelValues(id),
		inconsistencies:   m.inconsistent.WithLabelValues(id),
		stalls:            m.stalls.WithLabelValues(id),
	}
	for _, t := range []event.Type{event.Added, event.Modified, event.Deleted} {
		rm.events[t] = m.events.WithLabelValues(id, t.String())
	}
	return rm
}
