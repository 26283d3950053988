package route

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a router.
type Metrics struct {
	retries prometheus.Counter
}

// NewMetrics registers the router's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{retries: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kgate_gateway_cache_retries_total", Help: "Reads sent to another replica after one failed.",
	})}
	if err := reg.Register(m.retries); err != nil {
		return nil, fmt.Errorf("cannot register router metrics: %w", err)
	}
	return m, nil
}
