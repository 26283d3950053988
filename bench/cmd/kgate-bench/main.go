// Command kgate-bench is the load harness for kgate — or any Kubernetes
// API server: it seeds realistic objects, runs the scenarios (get, list,
// watch-fanout, write, mixed, etcd-baseline, memory) against one
// kubeconfig or two side by side, and writes JSON, Markdown and PNG
// plots. See bench/README.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/kgate/kgate/bench/internal/report"
	"github.com/kgate/kgate/bench/internal/scenario"
	"github.com/kgate/kgate/bench/internal/seed"
	"github.com/kgate/kgate/bench/internal/suite"
	"github.com/kgate/kgate/bench/internal/target"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == "report" {
		err = rerender(os.Args[2:])
	} else {
		err = run(ctx, os.Args[1:])
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "kgate-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kgate-bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: kgate-bench [flags]            run scenarios, write bench/results/<timestamp>/\n       kgate-bench report DIR|results.json   redraw a report\n\nScenario specs (--scenario, repeatable): kind[,key=value...], kinds: %s.\nSee bench/README.md.\n\n", strings.Join(scenario.Kinds, ", "))
		fs.PrintDefaults()
	}
	var (
		kubeconfig    = fs.String("kubeconfig", "", "kubeconfig of the server under test")
		kubeContext   = fs.String("context", "", "kubeconfig context (default: current)")
		name          = fs.String("name", "", "name of the server under test in reports (default kgate with --start-kgate, else primary)")
		pids          = fs.String("pids", "", "comma-separated local pids of the server (CPU and RSS from /proc)")
		metricsURL    = fs.String("metrics-url", "", "http(s) URL of the cache's /metrics for heap (default: the API server's /metrics)")
		cmpKubeconfig = fs.String("compare-kubeconfig", "", "kubeconfig of a second server run back to back with the first (ratios)")
		cmpContext    = fs.String("compare-context", "", "context of --compare-kubeconfig")
		cmpName       = fs.String("compare-name", "compare", "name of the second server")
		cmpPids       = fs.String("compare-pids", "", "local pids of the second server")
		cmpMetricsURL = fs.String("compare-metrics-url", "", "heap metrics URL of the second server")
		startKgate    = fs.String("start-kgate", "", "kgate binary to start as `kgate dev` (temp dir, free port) and benchmark")
		etcdEndpoints = fs.String("etcd-endpoints", "", "comma-separated etcd URLs for the etcd-baseline scenarios")
		etcdPids      = fs.String("etcd-pids", "", "local pids of etcd")
		etcdCA        = fs.String("etcd-cafile", "", "CA that signs etcd's serving certificate (with --etcd-endpoints)")
		etcdCert      = fs.String("etcd-certfile", "", "client certificate for etcd (with --etcd-keyfile)")
		etcdKey       = fs.String("etcd-keyfile", "", "client key for etcd")
		specs         stringList
		runs          = fs.Int("runs", 3, "runs per figure (the median and min–max are reported)")
		duration      = fs.Duration("duration", 10*time.Second, "default duration of one run")
		concurrency   = fs.Int("concurrency", 8, "default workers per scenario")
		rate          = fs.Float64("rate", 0, "default open-loop target ops/s (0: closed loop)")
		namespaces    = fs.Int("namespaces", 10, "seeded namespaces")
		pods          = fs.Int("pods", 1000, "seeded pods (about 4.7 KB of JSON each)")
		configmaps    = fs.Int("configmaps", 1000, "seeded ConfigMaps")
		cmSize        = fs.Int("configmap-size", 1024, "bytes of data per ConfigMap")
		seedConc      = fs.Int("seed-concurrency", 16, "writes in flight while seeding")
		watchers      = fs.Int("watchers", 100, "default watchers of watch-fanout")
		watchEvents   = fs.Float64("watch-events", 100, "default events/s of watch-fanout")
		informers     = fs.Int("informers", 3, "default informers of mixed")
		memoryPods    = fs.Int("memory-pods", 100000, "pods the memory scenario loads")
		out           = fs.String("out", filepath.Join("bench", "results"), "results folder (a <timestamp> folder is made in it)")
		prefix        = fs.String("prefix", "kgate-bench", "prefix of the namespaces and etcd keys the harness creates")
		cleanup       = fs.Bool("cleanup", true, "delete the harness's namespaces at the end")
		logLevel      = fs.String("log-level", "info", "debug, info, warn or error")
	)
	fs.Var(&specs, "scenario", "scenario spec, repeatable (default: every kind with its defaults)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	var targets []target.Config
	if *kubeconfig != "" {
		p, err := parsePids(*pids)
		if err != nil {
			return err
		}
		targets = append(targets, target.Config{Name: *name, Kubeconfig: *kubeconfig, Context: *kubeContext, Pids: p, MetricsURL: *metricsURL})
	} else if *startKgate == "" {
		return errors.New("--kubeconfig or --start-kgate is required")
	}
	if *cmpKubeconfig != "" {
		p, err := parsePids(*cmpPids)
		if err != nil {
			return err
		}
		targets = append(targets, target.Config{Name: *cmpName, Kubeconfig: *cmpKubeconfig, Context: *cmpContext, Pids: p, MetricsURL: *cmpMetricsURL})
	}
	ep, err := parsePids(*etcdPids)
	if err != nil {
		return err
	}
	var etcdTLS *tls.Config
	if *etcdCA != "" || *etcdCert != "" || *etcdKey != "" {
		info := transport.TLSInfo{TrustedCAFile: *etcdCA, CertFile: *etcdCert, KeyFile: *etcdKey}
		if etcdTLS, err = info.ClientConfig(); err != nil {
			return fmt.Errorf("cannot load etcd client TLS: %w", err)
		}
	}
	s, err := suite.New(suite.Config{
		Targets: targets, StartKgate: *startKgate,
		EtcdEndpoints: splitList(*etcdEndpoints), EtcdPids: ep, EtcdTLS: etcdTLS,
		Specs: specs, Runs: *runs,
		Defaults: scenario.Defaults{
			Common:   scenario.Common{Concurrency: *concurrency, Duration: *duration, Rate: *rate},
			Watchers: *watchers, WatchEvents: *watchEvents, Informers: *informers, MemoryPods: *memoryPods, ConfigMapBytes: *cmSize,
		},
		Seed:            seed.Layout{Namespaces: *namespaces, Pods: *pods, ConfigMaps: *configmaps, ConfigMapBytes: *cmSize},
		SeedConcurrency: *seedConc, Prefix: *prefix, OutDir: *out, Cleanup: *cleanup,
		Command: append([]string{"kgate-bench"}, args...), Logger: log, Progress: os.Stderr,
	})
	if err != nil {
		return err
	}
	files, err := s.Run(ctx)
	if files != nil {
		fmt.Printf("results: %s\n  %s\n", files.Markdown, files.JSON)
		for _, p := range files.Plots {
			fmt.Printf("  %s\n", p)
		}
	}
	return err
}

// rerender redraws results.md and the plots from a results.json.
func rerender(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: kgate-bench report DIR|results.json")
	}
	path := args[0]
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "results.json")
	}
	r, err := report.Load(path)
	if err != nil {
		return err
	}
	files, err := report.Write(filepath.Dir(path), r)
	if err != nil {
		return err
	}
	fmt.Println(files.Markdown)
	return nil
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parsePids(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a pid", p)
		}
		out = append(out, n)
	}
	return out, nil
}
