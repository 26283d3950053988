package directory

import "github.com/prometheus/client_golang/prometheus"

// metrics of a directory:
//
//	kgate_directory_nodes: cache nodes heard from and not expired
//	kgate_directory_range_replicas{range}: ready replicas of each range
//	kgate_directory_ignored_messages_total{reason}: status messages
//	  ignored, "malformed" or sent on a "subject" not the node's own
//	kgate_directory_deaf_sweeps_total: sweeps that kept silent nodes
//	  because the directory's own NATS link did not answer
type metrics struct {
	deaf     prometheus.Counter     // nil: not registered
	ignored  *prometheus.CounterVec // nil: not registered
	nodes    prometheus.Gauge       // nil: not registered
	replicas *prometheus.GaugeVec   // nil: not registered
	ranges   map[string]bool        // label values set on replicas
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return &metrics{}, nil
	}
	m := &metrics{
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kgate_directory_nodes", Help: "Cache nodes heard from and not expired.",
		}),
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kgate_directory_range_replicas", Help: "Ready replicas of each range.",
		}, []string{"range"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kgate_directory_ignored_messages_total", Help: "Status messages ignored: malformed, or sent on another node's subject.",
		}, []string{"reason"}),
		deaf: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_directory_deaf_sweeps_total", Help: "Sweeps that kept nodes not heard from because the directory's own NATS link did not answer.",
		}),
		ranges: map[string]bool{},
	}
	for _, c := range []prometheus.Collector{m.nodes, m.replicas, m.ignored, m.deaf} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// set updates the gauges; the caller holds the directory's lock. A range
// no node announces any more keeps reporting 0 replicas — an alert on
// replicas == 0 should fire for it.
func (m *metrics) set(nodes int, ready map[string][]Replica) {
	if m.nodes == nil {
		return
	}
	m.nodes.Set(float64(nodes))
	for id := range ready {
		m.ranges[id] = true
	}
	for id := range m.ranges {
		m.replicas.WithLabelValues(id).Set(float64(len(ready[id])))
	}
}

// ignore counts a status message ignored for reason.
func (m *metrics) ignore(reason string) {
	if m.ignored != nil {
		m.ignored.WithLabelValues(reason).Inc()
	}
}

// deafSweep counts a sweep that kept silent nodes.
func (m *metrics) deafSweep() {
	if m.deaf != nil {
		m.deaf.Inc()
	}
}
