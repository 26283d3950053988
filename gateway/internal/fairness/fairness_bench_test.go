package fairness

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkAdmit is a request admitted under its user's rate: it
// allocates its Ticket only.
func BenchmarkAdmit(b *testing.B) {
	l, err := New(Config{UserQPS: 1e9, Metrics: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	r := &Request{User: "alice", Groups: []string{"system:authenticated"}, Verb: "get", Resource: "pods"}
	b.ReportAllocs()
	for b.Loop() {
		t, err := l.Admit(r)
		if err != nil {
			b.Fatal(err)
		}
		t.Done(r.Verb, 0)
	}
}
