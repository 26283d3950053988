package route

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a router.
type Metrics struct {
	retries prometheus.Counter
	behind  prometheus.Counter
}

// NewMetrics registers the router's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{retries: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kgate_gateway_cache_retries_total", Help: "Reads sent to another replica after one failed.",
	}), behind: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kgate_gateway_cache_behind_total", Help: "Reads of any revision (resourceVersion=0) no replica could serve as new as the gateway had served before, served older.",
	})}
	for _, c := range []prometheus.Collector{m.retries, m.behind} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register router metrics: %w", err)
		}
	}
	return m, nil
}
