package storagetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric is the value of the series name{labels} gathered from g — a
// counter's, a gauge's or an untyped metric's; labels are name, value
// pairs the series must carry (it may carry others). It is absent (ok
// false) when no series matches.
func Metric(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) (value float64, ok bool) {
	tb.Helper()
	if len(labels)%2 != 0 {
		tb.Fatalf("Metric %s: labels must be name, value pairs: %q", name, labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i < len(labels); i += 2 {
				if v, ok := have[labels[i]]; !ok || v != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetUntyped() != nil:
				return m.GetUntyped().GetValue(), true
			}
		}
	}
	return 0, false
}
