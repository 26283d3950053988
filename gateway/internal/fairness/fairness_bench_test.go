package fairness

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkAdmit is a request admitted at once, under the in-flight
// limits and the user's rate: it allocates its Ticket only.
func BenchmarkAdmit(b *testing.B) {
	l, err := New(Config{MaxInflight: 400, MaxMutatingInflight: 200, UserQPS: 1e9, Metrics: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	r := &Request{User: "alice", Groups: []string{"system:authenticated"}, Verb: "get", Resource: "pods"}
	b.ReportAllocs()
	for b.Loop() {
		t, err := l.Admit(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		t.Done(r.Verb, 0)
	}
}
