package cachenode

import (
	"github.com/kgate/kgate/cachenode/internal/publisher"
	"github.com/kgate/kgate/cachenode/internal/readapi"
	"github.com/kgate/kgate/cachenode/internal/reflector"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of a node. Each part defines its own (kgate_cachenode_*):
//
//	reflector: events_total{range,type}, relists_total, decode_errors_total,
//	  store_objects, store_bytes, window_events, window_bytes,
//	  seen_revision, seen_lag_revisions (all by range)
//	publisher: published_total{range,kind}, publish_errors_total{range}
//	read API:  requests_total{verb,code}, request_duration_seconds{verb}
//	node:      ranges, ranges_ready
type metrics struct {
	reflector *reflector.Metrics
	publisher *publisher.Metrics
	readapi   *readapi.Metrics
}

func newMetrics(reg prometheus.Registerer, n *Node) *metrics {
	if reg != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_ranges", Help: "Ranges this node reflects.",
			}, func() float64 { return float64(len(n.reflectors)) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_ranges_ready", Help: "Ranges listed and followed.",
			}, func() float64 {
				ready := 0
				for _, r := range n.reflectors {
					if r.Ready() {
						ready++
					}
				}
				return float64(ready)
			}),
		)
	}
	return &metrics{
		reflector: reflector.NewMetrics(reg),
		publisher: publisher.NewMetrics(reg),
		readapi:   readapi.NewMetrics(reg),
	}
}
