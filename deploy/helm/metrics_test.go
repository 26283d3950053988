package helm

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/cachenode/natsmetrics"
	"github.com/kgate/kgate/deploy/role"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/storagetest"
)

// targetLabels are the labels Prometheus adds to every series it scrapes
// through the chart's ServiceMonitors.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint"}

// external are metrics the alerts query that other programs export:
// what exports each.
var external = map[string]string{
	"up": "Prometheus, for every target",
	"certmanager_certificate_expiration_timestamp_seconds": "cert-manager's controller (rendered only with certManager.enabled)",
}

// family is what one exported metric family is: its labels, and whether
// it has _bucket, _sum and _count series.
type family struct {
	labels   []string
	observer bool // histogram or summary
}

// TestQueriedMetricsExist: every metric a dashboard or an alert queries
// is exported by kgate's gateway or cache node (their registries built
// as kgate's main builds them, every collector described, whether it has
// observed anything or not) or by etcd (its registry in this process,
// running), with the labels the query matches or groups by. Histograms
// are queried as _bucket, _sum and _count.
func TestQueriedMetricsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and NATS")
	}
	queries := dashboardQueries(t)
	if os.Getenv("HELM_BIN") != "" {
		maps(queries, alertQueries(t))
	} else {
		t.Log("HELM_BIN not set: the alerts (rendered by helm) are not checked, only the dashboards")
	}
	exported := exportedFamilies(t)
	var names []string
	for where, expr := range queries {
		sel, err := parsePromQL(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		allowed := slices.Clone(targetLabels)
		for name, labels := range sel.metrics {
			names = append(names, name)
			if _, ok := external[name]; ok {
				continue
			}
			f, ok := lookup(exported, name)
			if !ok {
				t.Errorf("%s: queries %s, which neither kgate nor etcd exports", where, name)
				continue
			}
			allowed = append(allowed, f.labels...)
			for _, l := range labels {
				if !slices.Contains(f.labels, l) && !slices.Contains(targetLabels, l) {
					t.Errorf("%s: matches label %q of %s, which has %v", where, l, name, f.labels)
				}
			}
		}
		for _, l := range sel.grouped {
			if !slices.Contains(allowed, l) {
				t.Errorf("%s: groups by %q, a label of none of its metrics", where, l)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) < 30 {
		t.Fatalf("found %d metrics in %d queries: the dashboards and alerts were not all read", len(names), len(queries))
	}
	t.Logf("%d queries read %d metrics", len(queries), len(names))
}

// lookup finds the family a queried name is a series of.
func lookup(exported map[string]family, name string) (family, bool) {
	if f, ok := exported[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if f, found := exported[base]; ok && found && f.observer {
			if suffix == "_bucket" {
				f.labels = append(slices.Clone(f.labels), "le")
			}
			return f, true
		}
	}
	return family{}, false
}

func maps(dst, src map[string]string) {
	for k, v := range src {
		dst[k] = v
	}
}

// dashboardQueries are the expressions of every panel target and every
// label_values() variable of the chart's dashboards, by where they are.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "dashboards", "*.json"))
	if err != nil || len(files) < 5 {
		t.Fatalf("dashboards: %v, %v: want five", files, err)
	}
	type target struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}
	type dashboard struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []target
		}
		Templating struct {
			List []struct {
				Name  string
				Type  string
				Query json.RawMessage
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([^,]+),\s*[a-zA-Z_]+\)$`)
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q queries nothing", f, p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q has an empty query", f, p.Title)
				}
				out[filepath.Base(f)+": "+p.Title+" "+tg.RefID] = tg.Expr
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("%s: variable %s: %v", f, v.Name, err)
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				t.Errorf("%s: variable %s queries %q, not label_values(metric, label)", f, v.Name, q.Query)
				continue
			}
			out[filepath.Base(f)+": variable "+v.Name] = m[1]
		}
	}
	return out
}

// alertQueries are the expressions of the PrometheusRule rendered with
// every option on.
func alertQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range decode(t, render(t, "testdata/all-on.yaml")) {
		if o.u.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.u.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				r := r.(map[string]any)
				alert, _ := r["alert"].(string)
				expr, _ := r["expr"].(string)
				if alert == "" || expr == "" {
					t.Errorf("PrometheusRule: a rule without alert or expr: %v", r)
					continue
				}
				out["alert "+alert] = expr
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d alerts, want the chart's (at least 10)", len(out))
	}
	return out
}

// exportedFamilies builds a gateway and a cache node as `kgate gateway`
// and `kgate cachenode` do, each on its own registry, and returns every
// family they describe, with etcd's (gathered from this process's
// default registry, where the embedded etcd registers).
func exportedFamilies(t *testing.T) map[string]family {
	t.Helper()
	etcd := storagetest.StartEtcd(t)
	ns, err := natsembed.Start(natsembed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	log := storagetest.Logger(t)
	b, err := backend.Open(backend.Config{Etcd: etcd, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)

	out := map[string]family{}
	newCapture := func() *capture {
		c := &capture{reg: prometheus.NewRegistry(), families: out}
		c.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		// Each member's NATS connection, as kgate's main connects it.
		if _, err := natsmetrics.New(c, log); err != nil {
			t.Fatal(err)
		}
		return c
	}
	cn := newCapture()
	node, err := role.NewCacheNode(role.CacheNodeConfig{
		Node: cachenode.Config{
			Etcd: etcd, NATS: nc, Registry: b.Registry, Codec: b.Codec, Ranges: b.Ranges, Listen: "127.0.0.1:0",
			Logger: log, Metrics: cn,
		},
		Membership: role.Membership{Name: "cachenode-0", Bind: "127.0.0.1:0"},
		Replicas:   2, Logger: log, Metrics: cn,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	// Audit on, as the chart's audit.enabled: its metrics exist only then.
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := newCapture()
	g, err := role.NewGateway(role.GatewayConfig{
		Gateway: gateway.Config{
			Listen: "127.0.0.1:0", TLS: &tls.Config{}, Auth: gateway.AuthConfig{AnonymousAuth: true},
			Audit: gateway.AuditConfig{PolicyFile: policy, LogPath: filepath.Join(t.TempDir(), "audit.log")},
			// kgate's defaults: API Priority and Fairness on.
			Limits: gateway.LimitsConfig{MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200},
		},
		Deps:       gateway.Deps{Backend: b, NATS: nc, Logger: log, Metrics: gw, Gatherer: gw.reg},
		Membership: role.Membership{Name: "gateway-0", Bind: "127.0.0.1:0"},
		Logger:     log, Metrics: gw,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Gateway.Close(); g.Members.Close() })
	// API Priority and Fairness's metrics are upstream's, in the legacy
	// registry, whose apiserver_flowcontrol_* families the gateway serves
	// beside its own (apf.Gatherer); their
	// series appear per priority level as requests come. A level's
	// series, as a queued and then executed request makes them:
	ctx := context.Background()
	fcmetrics.AddRequestsInQueues(ctx, "level", "schema", 0)
	fcmetrics.AddRequestsExecuting(ctx, "level", "schema", 0)
	fcmetrics.ObserveWaitingDuration(ctx, "level", "schema", "true", 0)
	apfFamilies, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var etcdFamilies int
	for _, mf := range append(mfs, apfFamilies...) {
		if strings.HasPrefix(mf.GetName(), "etcd_") {
			etcdFamilies++
		} else if !strings.HasPrefix(mf.GetName(), "apiserver_flowcontrol_") {
			continue
		}
		f := family{observer: mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_SUMMARY}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(f.labels, lp.GetName()) {
					f.labels = append(f.labels, lp.GetName())
				}
			}
		}
		out[mf.GetName()] = f
	}
	if etcdFamilies < 20 {
		t.Fatalf("gathered %d etcd families from the default registry: does the embedded etcd still register there?", etcdFamilies)
	}
	var ours []string
	for name := range out {
		if strings.HasPrefix(name, "kgate_") || strings.HasPrefix(name, "apiserver_") {
			ours = append(ours, name)
		}
	}
	sort.Strings(ours)
	t.Logf("kgate exports %d families of its own: %v", len(ours), ours)
	return out
}

// capture registers on reg and records every family a collector
// describes, with its labels, and whether it observes (histograms and
// summaries).
type capture struct {
	reg      *prometheus.Registry
	families map[string]family
}

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*, constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)
var constLabelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

func (c *capture) Register(col prometheus.Collector) error {
	if err := c.reg.Register(col); err != nil {
		return err
	}
	var observer bool
	switch col.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec, prometheus.Summary, *prometheus.SummaryVec:
		observer = true
	}
	ch := make(chan *prometheus.Desc)
	go func() { col.Describe(ch); close(ch) }()
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			panic("cannot read " + d.String())
		}
		f := family{observer: observer}
		for _, cl := range constLabelRE.FindAllStringSubmatch(m[2], -1) {
			f.labels = append(f.labels, cl[1])
		}
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				f.labels = append(f.labels, l)
			}
		}
		c.families[m[1]] = f
	}
	return nil
}

func (c *capture) MustRegister(cs ...prometheus.Collector) {
	for _, col := range cs {
		if err := c.Register(col); err != nil {
			panic(err)
		}
	}
}

func (c *capture) Unregister(col prometheus.Collector) bool { return c.reg.Unregister(col) }
