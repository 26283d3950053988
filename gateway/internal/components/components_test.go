package components

import (
	"crypto/tls"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/storage/backend"
)

// TestNewChecksAndReleases: New refuses missing parts, and one that
// fails part way (a bad version, before anything runs) closes what it
// built without touching what it did not build.
func TestNewChecksAndReleases(t *testing.T) {
	prom := prometheus.NewRegistry()
	full := Deps{Backend: &backend.Backend{}, NATS: &nats.Conn{}, Logger: slog.New(slog.DiscardHandler), Metrics: prom, Gatherer: prom}
	for _, tc := range []struct {
		name string
		cfg  Config
		deps func(Deps) Deps
		want string
	}{
		{"no TLS", Config{CacheNodes: []string{"a"}}, func(d Deps) Deps { return d }, "required"},
		{"no backend", Config{TLS: &tls.Config{}, CacheNodes: []string{"a"}}, func(d Deps) Deps { d.Backend = nil; return d }, "required"},
		{"no NATS", Config{TLS: &tls.Config{}, CacheNodes: []string{"a"}}, func(d Deps) Deps { d.NATS = nil; return d }, "required"},
		{"no logger", Config{TLS: &tls.Config{}, CacheNodes: []string{"a"}}, func(d Deps) Deps { d.Logger = nil; return d }, "required"},
		{"no cache nodes", Config{TLS: &tls.Config{}}, func(d Deps) Deps { return d }, "cache nodes"},
		{"bad version", Config{TLS: &tls.Config{}, CacheNodes: []string{"a"}, KubernetesVersion: "one"}, func(d Deps) Deps { return d }, "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg, tc.deps(full))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an error with %q", s, err, tc.want)
			}
		})
	}
}
