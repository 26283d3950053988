package rest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the REST handlers.
type Metrics struct {
	listRanges prometheus.Histogram
}

// NewMetrics registers the handlers' metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{listRanges: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kgate_gateway_list_ranges",
		Help:    "Ranges (cache node reads) one list page was gathered from.",
		Buckets: []float64{1, 2, 4, 8, 16, 32},
	})}
	if err := reg.Register(m.listRanges); err != nil {
		return nil, fmt.Errorf("cannot register REST metrics: %w", err)
	}
	return m, nil
}
