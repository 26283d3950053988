package rest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgate/kgate/gateway/internal/watchhub"
)

// A watch is in apiserver_longrunning_requests while it streams, and each
// event it sends counts in apiserver_watch_events_total and _sizes.
func TestWatchMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Metrics = m })
	w := e.watch(e.server(), "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=5")
	s := <-e.hub.started
	long := m.longRunning.WithLabelValues("WATCH", "", "v1", "pods", "", "namespace", "apiserver")
	if got := testutil.ToFloat64(long); got != 1 {
		t.Errorf("apiserver_longrunning_requests = %v while the watch streams, want 1", got)
	}
	p := pod("ns", "p", map[string]string{"app": "web"})
	for i, typ := range []watchhub.Type{watchhub.Added, watchhub.Modified} {
		s.in <- delivery(t, e, typ, p, int64(6+i))
		w.next()
	}
	if got := testutil.ToFloat64(m.watchEvents.WithLabelValues("", "v1", "pods")); got != 2 {
		t.Errorf("apiserver_watch_events_total = %v, want 2", got)
	}
	if n := testutil.CollectAndCount(m.watchSizes); n != 1 {
		t.Errorf("%d apiserver_watch_events_sizes series, want 1", n)
	}
	w.conn.Close()
	<-s.closed
	if err := e.h.WaitWatches(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(long); got != 0 {
		t.Errorf("apiserver_longrunning_requests = %v after the watch, want 0", got)
	}
}
