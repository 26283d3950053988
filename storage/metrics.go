package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/storage/registry"
)

// metrics are the store's etcd request metrics under kube-apiserver's
// names and labels (etcd_request_duration_seconds, etcd_requests_total,
// etcd_request_errors_total; operation, group, resource). One operation
// is one Store call: a get, list, create, update or delete, with the
// reads and retries an update or delete makes before its transaction.
type metrics struct {
	duration *prometheus.HistogramVec
	total    *prometheus.CounterVec
	errors   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, etcd statuser) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	labels := []string{"operation", "group", "resource"}
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "etcd_request_duration_seconds",
			Help:    "Etcd request latency in seconds for each operation and object type.",
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
		}, labels),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_requests_total",
			Help: "Etcd request counts for each operation and object type.",
		}, labels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_request_errors_total",
			Help: "Etcd failed request counts for each operation and object type.",
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.duration, m.total, m.errors, &dbSize{etcd: etcd}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register storage metrics: %w", err)
		}
	}
	return m, nil
}

// statuser asks an etcd member for its status (clientv3.Client).
type statuser interface {
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
	Endpoints() []string
}

// dbSizeDesc is kube-apiserver's apiserver_storage_size_bytes: etcd's
// database file size, asked of a random endpoint at each scrape (one
// second at most), labelled etcd-0 as kube-apiserver labels its first
// (here only) storage cluster. With compaction it levels off instead of
// growing with every write.
var dbSizeDesc = prometheus.NewDesc("apiserver_storage_size_bytes", "Size of the storage database file physically allocated in bytes.", []string{"storage_cluster_id"}, nil)

type dbSize struct{ etcd statuser }

func (c *dbSize) Describe(ch chan<- *prometheus.Desc) { ch <- dbSizeDesc }

func (c *dbSize) Collect(ch chan<- prometheus.Metric) {
	eps := c.etcd.Endpoints()
	if len(eps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.etcd.Status(ctx, eps[rand.IntN(len(eps))])
	if err != nil {
		return // as upstream: no sample when etcd does not answer
	}
	ch <- prometheus.MustNewConstMetric(dbSizeDesc, prometheus.GaugeValue, float64(st.DbSize), "etcd-0")
}

// record records one operation on res that started at start. Only etcd's
// failures count as errors: not found, conflicts, preconditions and
// invalid objects are answers.
func (m *metrics) record(op string, res *registry.Resource, start time.Time, err error) {
	if m == nil {
		return
	}
	gvr := res.GVR()
	m.duration.WithLabelValues(op, gvr.Group, gvr.Resource).Observe(time.Since(start).Seconds())
	m.total.WithLabelValues(op, gvr.Group, gvr.Resource).Inc()
	if err != nil && etcdFailed(err) {
		m.errors.WithLabelValues(op, gvr.Group, gvr.Resource).Inc()
	}
}

// etcdFailed tells an error etcd returned (etcdError) from an answer.
func etcdFailed(err error) bool {
	for _, e := range []error{ErrUnavailable, ErrCompacted, ErrRevisionTooLarge, ErrTooLarge, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
