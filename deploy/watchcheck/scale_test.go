package watchcheck

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/storage/ranges"
)

// flagScaleAll runs every scale-out variant (each fault alone, with and
// without split ranges) instead of the one combined run.
var flagScaleAll = flag.Bool("watchcheck.scaleall", os.Getenv("WATCHCHECK_SCALEALL") == "1", "run every scale-out variant of TestScaleOutContract")

// configMapSplits cuts ConfigMaps into three ranges: one inside ns-1
// (namespaced watches of ns-1 merge two ranges) and one at ns-3;
// cluster-wide watches merge all three.
var configMapSplits = ranges.Config{Splits: map[string][]string{"configmaps": {"ns-1/cm-06", "ns-3"}}}

// Scale-out faults.
const (
	scaleKillNode    = "kill-cachenode" // kill a cache node, later start a new one under its name
	scaleKillGateway = "kill-gateway"   // kill a gateway (connections reset), later restart it
)

// TestScaleOutContract runs the watch contract — the writer, random
// watchers with selectors, two informers — against three cache nodes
// (two replicas per range) and two gateways. Clients reach the gateways
// through two L4 proxies, each preferring its own gateway and falling back
// to the other, so watchers are spread over both and move when one goes.
// Faults: a cache node is killed (no goodbye, no leave) and a new one
// started under its name later; a gateway is killed (every connection
// reset, then stopped) and started again on its address. A range always
// keeps a replica whose window reaches back to the start of the run, so no
// 410 is justified: every stream must be exact (nothing lost, duplicated
// or reordered) and no informer may relist.
//
// By default one run does both faults with ConfigMaps split into three
// ranges (merged watches across ranges); -watchcheck.scaleall (or
// WATCHCHECK_SCALEALL=1) runs each fault alone, split and not.
func TestScaleOutContract(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	s := seed(t)
	type variant struct {
		name   string
		split  bool
		faults []string
	}
	runs := []variant{{"split-both", true, []string{scaleKillNode, scaleKillGateway}}}
	if *flagScaleAll {
		runs = append(runs,
			variant{"cachenode", false, []string{scaleKillNode}},
			variant{"gateway", false, []string{scaleKillGateway}},
			variant{"split-cachenode", true, []string{scaleKillNode}},
			variant{"split-gateway", true, []string{scaleKillGateway}},
		)
	}
	for i, v := range runs {
		t.Run(v.name, func(t *testing.T) {
			cfg := MultiConfig{CacheNodes: 3, Gateways: 2, Replicas: 2}
			if v.split {
				cfg.Splits = configMapSplits
			}
			runScaleOut(t, cfg, v.faults, s+uint64(i))
		})
	}
}

func runScaleOut(t *testing.T, cfg MultiConfig, faults []string, seed uint64) {
	m := startMulti(t, cfg)
	// down[i]: proxies send no new connection to gateway i.
	var down [2]atomic.Bool
	proxies := make([]*Proxy, 2)
	for k := range proxies {
		proxies[k] = startProxy(t, func() []string {
			var out []string
			for _, i := range []int{k, 1 - k} {
				if !down[i].Load() {
					out = append(out, m.GatewayAddr(i))
				}
			}
			return out
		})
	}
	var (
		clientsMu sync.Mutex
		clients   = map[string]kubernetes.Interface{}
		events    []string // what the faults did, when
	)
	_, startRev, err := m.ConfigMaps(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	run := &contract{
		name:  strings.Join(faults, "+"),
		seed:  seed,
		truth: &m.Truth,
		client: func(t *testing.T, agent string, protobuf bool, i int) kubernetes.Interface {
			k := i % 2
			key := fmt.Sprintf("%s@%d", agent, k)
			clientsMu.Lock()
			defer clientsMu.Unlock()
			if cs, ok := clients[key]; ok {
				return cs
			}
			rc, err := m.RESTConfig(proxies[k].Addr(), agent, protobuf)
			if err != nil {
				t.Fatal(err)
			}
			cs := newClientset(t, rc)
			clients[key] = cs
			return cs
		},
		// Every range keeps a replica that has held it since before the
		// first write, with a window of an hour: nothing is too old.
		windowAt: func(time.Time) int64 { return startRev },
		counter: func(name string) float64 {
			return m.Counter(0, name, nil) + m.Counter(1, name, nil)
		},
	}
	run.fault = func(ctx context.Context, t *testing.T, start time.Time, d time.Duration, _ *writer, _ func(*testing.T)) {
		note := func(format string, args ...any) {
			events = append(events, fmt.Sprintf("%s %s", time.Since(start).Round(time.Millisecond), fmt.Sprintf(format, args...)))
		}
		// The faults come at fixed points of the run's real time.
		at := func(f float64) { time.Sleep(time.Until(start.Add(time.Duration(f * float64(d))))) }
		killNode, killGateway := false, false
		for _, f := range faults {
			killNode = killNode || f == scaleKillNode
			killGateway = killGateway || f == scaleKillGateway
		}
		victim := 0
		if killNode {
			// The primary (the publisher) of the first ConfigMaps range:
			// its events stop mid-stream.
			victim = m.Primary(m.ConfigMapRanges[0])
			at(0.3)
			if err := m.KillNode(victim); err != nil {
				t.Fatal(err)
			}
			note("killed cachenode-%d (owners of %s now %v)", victim, m.ConfigMapRanges[0], m.Owners(m.ConfigMapRanges[0]))
		}
		if killGateway {
			at(0.45)
			down[0].Store(true)
			cut := proxies[0].Cut(m.GatewayAddr(0)) + proxies[1].Cut(m.GatewayAddr(0))
			if err := m.StopGateway(0); err != nil {
				t.Error(err)
			}
			note("killed gateway-0 (%d connections reset)", cut)
		}
		if killNode {
			at(0.6)
			if err := m.StartNode(ctx, victim); err != nil {
				t.Fatal(err)
			}
			note("started cachenode-%d again", victim)
		}
		if killGateway {
			at(0.75)
			if err := m.StartGateway(ctx, 0); err != nil {
				t.Fatal(err)
			}
			down[0].Store(false)
			note("started gateway-0 again")
		}
	}
	run.summary = func(time.Time) string {
		lists := func(i int) float64 {
			return m.Counter(i, "apiserver_request_total", map[string]string{"verb": "LIST", "resource": "configmaps"})
		}
		watches := func(i int) float64 {
			return m.Counter(i, "apiserver_request_total", map[string]string{"verb": "WATCH", "resource": "configmaps"})
		}
		owners := make([]string, len(m.ConfigMapRanges))
		for i, id := range m.ConfigMapRanges {
			owners[i] = fmt.Sprintf("%s=%v", id, m.Owners(id))
		}
		return fmt.Sprintf("watches gw0=%.0f gw1=%.0f, lists gw0=%.0f gw1=%.0f | %s | owners at the end %s",
			watches(0), watches(1), lists(0), lists(1), strings.Join(events, "; "), strings.Join(owners, " "))
	}
	run.exec(t)
}
