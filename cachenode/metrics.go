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
//	node:      ranges, ranges_ready, ranges_primary, range_owner_changes_total,
//	  range_sync_seconds, range_handoff_seconds
type metrics struct {
	reflector *reflector.Metrics
	publisher *publisher.Metrics
	readapi   *readapi.Metrics
	// ownerChanges counts ranges started or stopped here.
	ownerChanges prometheus.Counter
	// sync is the time from starting a range to serving it; handoff the
	// time a former owner kept a range until its new owners were ready.
	sync, handoff prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, n *Node) *metrics {
	m := &metrics{
		reflector: reflector.NewMetrics(reg),
		publisher: publisher.NewMetrics(reg),
		readapi:   readapi.NewMetrics(reg),
		ownerChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_cachenode_range_owner_changes_total", Help: "Ranges this node started or stopped reflecting.",
		}),
		sync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kgate_cachenode_range_sync_seconds", Help: "Time from starting to reflect a range to serving it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kgate_cachenode_range_handoff_seconds", Help: "Time a former owner kept serving a range until its new owners were ready.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 12),
		}),
	}
	if reg != nil {
		count := func(pred func(RangeStatus) bool) func() float64 {
			return func() float64 {
				k := 0
				for _, s := range n.Status() {
					if pred(s) {
						k++
					}
				}
				return float64(k)
			}
		}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_ranges", Help: "Ranges this node reflects.",
			}, count(func(RangeStatus) bool { return true })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_ranges_ready", Help: "Ranges listed and followed.",
			}, count(func(s RangeStatus) bool { return s.Ready })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_ranges_primary", Help: "Ranges this node publishes.",
			}, count(func(s RangeStatus) bool { return s.Primary })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_window_node_bytes", Help: "Bytes only the node's windows keep alive (superseded and deleted versions), bounded by the node's window budget.",
			}, func() float64 { return float64(n.budget.Bytes()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_window_node_limit_bytes", Help: "The node's window budget now: its share of the bytes the node's stores hold, within its minimum and maximum.",
			}, func() float64 { return float64(n.budget.Limit()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "kgate_cachenode_window_budget_evictions_total", Help: "Events evicted from windows to keep the node within its window budget.",
			}, func() float64 { return float64(n.budget.Evictions()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kgate_cachenode_window_budget_evicted_age_seconds", Help: "Age of the last event evicted to keep the node within its window budget: how far back its windows reach.",
			}, func() float64 { return n.budget.EvictedAge().Seconds() }),
			m.ownerChanges, m.sync, m.handoff,
			storageObjects{n},
		)
	}
	return m
}

// storageObjects exports kube-apiserver's object counts
// (apiserver_storage_objects{resource}, apiserver_resource_objects{group,
// resource}) for the ranges this node publishes: each range has one
// primary, so the sum over the cache nodes is the count of the cluster.
type storageObjects struct{ n *Node }

var (
	storageObjectsDesc = prometheus.NewDesc("apiserver_storage_objects",
		"Number of stored objects at the time of last check split by kind, counted on the cache node that publishes each range: sum over cache nodes.", []string{"resource"}, nil)
	resourceObjectsDesc = prometheus.NewDesc("apiserver_resource_objects",
		"Number of stored objects at the time of last check split by group and resource, counted on the cache node that publishes each range: sum over cache nodes.", []string{"group", "resource"}, nil)
)

func (c storageObjects) Describe(ch chan<- *prometheus.Desc) {
	ch <- storageObjectsDesc
	ch <- resourceObjectsDesc
}

func (c storageObjects) Collect(ch chan<- prometheus.Metric) {
	for gr, k := range c.n.primaryObjects() {
		ch <- prometheus.MustNewConstMetric(storageObjectsDesc, prometheus.GaugeValue, float64(k), gr.String())
		ch <- prometheus.MustNewConstMetric(resourceObjectsDesc, prometheus.GaugeValue, float64(k), gr.Group, gr.Resource)
	}
}
