package reqmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

func TestObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, reg); err == nil {
		t.Fatal("registered the metrics twice")
	}
	m.Observe(&requestinfo.Info{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Resource: "pods", Namespace: "ns"}, 200, time.Millisecond)
	m.Observe(&requestinfo.Info{IsResourceRequest: true, Verb: "watch", APIVersion: "v1", Resource: "pods"}, 200, time.Hour)
	m.Observe(&requestinfo.Info{}, 400, 0) // unreadable: GET, no resource
	f := func(labels []string, want float64) {
		t.Helper()
		var c dto.Metric
		if err := m.requests.WithLabelValues(labels...).Write(&c); err != nil {
			t.Fatal(err)
		}
		if got := c.GetCounter().GetValue(); got != want {
			t.Errorf("apiserver_request_total%v = %v, want %v", labels, got, want)
		}
	}
	f([]string{"LIST", "", "v1", "pods", "", "namespace", "apiserver", "200"}, 1)
	f([]string{"WATCH", "", "v1", "pods", "", "cluster", "apiserver", "200"}, 1)
	f([]string{"GET", "", "", "", "", "", "apiserver", "400"}, 1)
	// Watches are counted, not timed.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == "apiserver_request_duration_seconds" && len(mf.GetMetric()) != 2 {
			t.Errorf("%d duration series, want 2 (no watch)", len(mf.GetMetric()))
		}
	}
	var rc fasthttp.RequestCtx
	m.Serve(&rc)
	if !strings.Contains(string(rc.Response.Body()), "apiserver_request_total") {
		t.Errorf("/metrics does not serve the request metrics: %q", rc.Response.Body())
	}
}
