package storagetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"range", "type"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"})
	reg.MustRegister(c, g)
	c.WithLabelValues("pods", "added").Add(3)
	c.WithLabelValues("pods", "deleted").Add(1)
	g.Set(7)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
		ok     bool
	}{
		{"c_total", []string{"range", "pods", "type", "deleted"}, 1, true},
		{"c_total", []string{"type", "added"}, 3, true},
		{"c_total", []string{"range", "leases"}, 0, false},
		{"g", nil, 7, true},
		{"missing", nil, 0, false},
	} {
		if got, ok := Metric(t, reg, tc.name, tc.labels...); got != tc.want || ok != tc.ok {
			t.Errorf("Metric(%s, %v) = %v, %v; want %v, %v", tc.name, tc.labels, got, ok, tc.want, tc.ok)
		}
	}
}
