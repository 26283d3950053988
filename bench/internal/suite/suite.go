// Package suite runs a benchmark: it opens the targets (starting a
// `kgate dev` when asked), seeds them, runs every scenario --runs times on
// each target back to back, and writes the report.
package suite

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kgate/kgate/bench/internal/devserver"
	"github.com/kgate/kgate/bench/internal/report"
	"github.com/kgate/kgate/bench/internal/scenario"
	"github.com/kgate/kgate/bench/internal/seed"
	"github.com/kgate/kgate/bench/internal/target"
)

// Config is one benchmark invocation.
type Config struct {
	// Targets are the servers under test; the first is the primary, the
	// second (optional) is compared with it.
	Targets []target.Config
	// StartKgate is a kgate binary to run as `kgate dev` and put first in
	// Targets (its kubeconfig, pid and embedded etcd filled in).
	StartKgate string
	// EtcdEndpoints reach the etcd behind the targets, for the etcd
	// scenarios; EtcdPids are its local processes.
	EtcdEndpoints []string
	EtcdPids      []int
	// EtcdTLS is the client TLS for EtcdEndpoints (nil: plaintext).
	EtcdTLS *tls.Config
	// Specs are scenario specs (scenario.Parse); empty runs every kind.
	Specs    []string
	Defaults scenario.Defaults
	// Runs per figure (default 3).
	Runs int
	// Seed is the data set read scenarios use (Prefix and Set are filled
	// in); SeedConcurrency bounds its writes.
	Seed            seed.Layout
	SeedConcurrency int
	// Prefix starts every namespace and etcd key the harness makes.
	Prefix string
	// OutDir gets a <timestamp> folder with the report.
	OutDir string
	// Cleanup deletes the harness's namespaces at the end.
	Cleanup bool
	// Command is recorded in the report.
	Command []string
	Logger  *slog.Logger
	// Progress receives progress bars (stderr).
	Progress io.Writer
}

// Suite is a configured benchmark.
type Suite struct {
	cfg       Config
	scenarios []scenario.Scenario
}

// New validates cfg and parses the scenarios.
func New(cfg Config) (*Suite, error) {
	if cfg.Logger == nil {
		return nil, errors.New("suite: Logger is required")
	}
	if len(cfg.Targets) == 0 && cfg.StartKgate == "" {
		return nil, errors.New("suite: a kubeconfig or a kgate binary to start is required")
	}
	if len(cfg.Targets) > 2 || (cfg.StartKgate != "" && len(cfg.Targets) > 1) {
		return nil, errors.New("suite: at most two targets (a primary and one to compare)")
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 3
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "kgate-bench"
	}
	if cfg.OutDir == "" {
		cfg.OutDir = filepath.Join("bench", "results")
	}
	if cfg.SeedConcurrency <= 0 {
		cfg.SeedConcurrency = 16
	}
	cfg.Seed.Prefix, cfg.Seed.Set = cfg.Prefix, "seed"
	if cfg.Seed.Namespaces <= 0 || cfg.Seed.Pods <= 0 {
		return nil, errors.New("suite: the seed needs at least one namespace and one pod")
	}
	specs := cfg.Specs
	if len(specs) == 0 {
		specs = scenario.Kinds
	}
	s := &Suite{cfg: cfg}
	seen := map[string]bool{}
	for _, spec := range specs {
		scs, err := scenario.Parse(spec, cfg.Defaults)
		if err != nil {
			return nil, err
		}
		for _, sc := range scs {
			if seen[sc.Name()] {
				return nil, fmt.Errorf("suite: scenario %s given twice", sc.Name())
			}
			seen[sc.Name()] = true
			s.scenarios = append(s.scenarios, sc)
		}
	}
	return s, nil
}

// Run runs the benchmark and writes the report; it returns the files.
func (s *Suite) Run(ctx context.Context) (*report.Files, error) {
	cfg := s.cfg
	log := cfg.Logger
	res := &report.Results{
		Schema: report.SchemaVersion, Started: time.Now(), Command: cfg.Command, Runs: cfg.Runs,
		Host: hostInfo(),
	}
	outDir := filepath.Join(cfg.OutDir, res.Started.Format("20060102-150405"))
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}

	targetCfgs := cfg.Targets
	etcdEndpoints, etcdPids, etcdTLS := cfg.EtcdEndpoints, cfg.EtcdPids, cfg.EtcdTLS
	if cfg.StartKgate != "" {
		logFile, err := os.Create(filepath.Join(outDir, "kgate-dev.log"))
		if err != nil {
			return nil, err
		}
		defer logFile.Close()
		log.Info("starting kgate dev", "bin", cfg.StartKgate, "log", logFile.Name())
		t0 := time.Now()
		dev, err := devserver.Start(ctx, devserver.Config{Bin: cfg.StartKgate, Log: logFile})
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := dev.Close(); err != nil {
				log.Warn("cannot stop kgate dev", "err", err)
			}
		}()
		// Stop measuring (and write what was measured) if kgate dies.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		var watch sync.WaitGroup
		defer watch.Wait()
		defer cancel(nil)
		watch.Go(func() {
			select {
			case <-dev.Exited():
				log.Error("kgate dev exited during the benchmark; see its log", "log", logFile.Name())
				cancel(errors.New("kgate dev exited"))
			case <-ctx.Done():
			}
		})
		log.Info("kgate dev ready", "addr", dev.Addr, "pid", dev.Pid, "etcd", dev.EtcdEndpoints, "took", time.Since(t0).Round(time.Millisecond))
		targetCfgs = append([]target.Config{{Name: "kgate", Kubeconfig: dev.Kubeconfig, Pids: []int{dev.Pid}}}, targetCfgs...)
		if len(etcdEndpoints) == 0 {
			etcdEndpoints, etcdPids, etcdTLS = dev.EtcdEndpoints, []int{dev.Pid}, dev.EtcdTLS
		}
		res.Notes = append(res.Notes, fmt.Sprintf("kgate is `kgate dev` (pid %d): gateway, cache node, embedded etcd and NATS in one process, so its CPU and RSS include etcd's and NATS's; the etcd scenarios use that embedded etcd.", dev.Pid))
	}

	var targets []*target.Target
	for i, tc := range targetCfgs {
		if tc.Name == "" {
			tc.Name = []string{"primary", "compare"}[i]
		}
		t, err := target.Open(tc)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = t.Ready(rctx)
		cancel()
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
		res.Targets = append(res.Targets, report.Target{Name: t.Name, Kubeconfig: tc.Kubeconfig, Server: t.Host(), Version: t.Version(), Pids: t.Pids})
	}
	if len(targets) == 2 && targets[0].Name == targets[1].Name {
		return nil, fmt.Errorf("suite: both targets are named %q", targets[0].Name)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("The harness runs on the same %d CPUs as any local server; client CPU ms/op is the harness's own share (client-go encoding and decoding).", runtime.NumCPU()))

	var etcd *clientv3.Client
	if len(etcdEndpoints) > 0 {
		var err error
		if etcd, err = clientv3.New(clientv3.Config{Endpoints: etcdEndpoints, TLS: etcdTLS, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}); err != nil {
			return nil, fmt.Errorf("cannot connect to etcd %v: %w", etcdEndpoints, err)
		}
		defer etcd.Close()
		res.Targets = append(res.Targets, report.Target{Name: "etcd", Server: strings.Join(etcdEndpoints, ","), Pids: etcdPids})
	}

	s.notes(ctx, res, targets)
	if s.needsSeed() {
		for i, t := range targets {
			sd, err := s.seed(ctx, t)
			if err != nil {
				return nil, err
			}
			res.Targets[i].Seed = sd
		}
	}

	for _, sc := range s.scenarios {
		r, notes := s.runScenario(ctx, sc, targets, etcd, etcdPids)
		res.Scenarios = append(res.Scenarios, r)
		res.Notes = append(res.Notes, notes...)
		if ctx.Err() != nil {
			log.Warn("interrupted: writing what was measured", "cause", context.Cause(ctx))
			res.Notes = append(res.Notes, fmt.Sprintf("Interrupted after %s: %v.", sc.Name(), context.Cause(ctx)))
			break
		}
	}
	if cfg.Cleanup && ctx.Err() == nil {
		for _, t := range targets {
			s.cleanup(ctx, t)
		}
	}
	res.Finished = time.Now()
	files, err := report.Write(outDir, res)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return files, context.Cause(ctx)
	}
	return files, nil
}

func (s *Suite) needsSeed() bool {
	for _, sc := range s.scenarios {
		if sc.Seeded() {
			return true
		}
	}
	return false
}

// notes records, before the scenarios run, what the servers cannot report.
func (s *Suite) notes(ctx context.Context, res *report.Results, targets []*target.Target) {
	memory := false
	for _, sc := range s.scenarios {
		memory = memory || sc.Kind() == "memory"
	}
	for _, t := range targets {
		if len(t.Pids) == 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: no --pids, so no server CPU or RSS.", t.Name))
		}
		if !memory {
			continue
		}
		_, ok, err := t.Heap(ctx)
		switch {
		case err != nil:
			res.Notes = append(res.Notes, fmt.Sprintf("%s: cannot read its metrics (%v), so no heap per object.", t.Name, err))
		case !ok:
			res.Notes = append(res.Notes, fmt.Sprintf("%s: its /metrics has no %s (no Go collector registered), so no heap per object; RSS per object comes from /proc.", t.Name, target.HeapMetric))
		}
	}
}

func (s *Suite) seed(ctx context.Context, t *target.Target) (*report.Seed, error) {
	cfg, log := s.cfg, s.cfg.Logger
	l := cfg.Seed
	t0 := time.Now()
	if err := seed.Namespaces(ctx, t.Proto, l.AllNamespaces()); err != nil {
		return nil, err
	}
	sc := seed.Config{Client: t.Proto, Layout: l, Concurrency: cfg.SeedConcurrency, Progress: cfg.Progress}
	pods, err := seed.Pods(ctx, sc, 0, l.Pods)
	if err != nil {
		return nil, err
	}
	cms, err := seed.ConfigMaps(ctx, sc)
	if err != nil {
		return nil, err
	}
	out := &report.Seed{
		Namespaces: l.Namespaces, Pods: l.Pods, ConfigMaps: l.ConfigMaps, ConfigMapBytes: l.ConfigMapBytes,
		Created: pods.Created + cms.Created, Existing: pods.Existing + cms.Existing, Failed: pods.Failed + cms.Failed,
		PodJSONBytes: pods.PodJSONBytes, Seconds: time.Since(t0).Seconds(),
	}
	log.Info("seeded", "target", t.Name, "pods", l.Pods, "configmaps", l.ConfigMaps, "created", out.Created, "existing", out.Existing,
		"failed", out.Failed, "pod_json_bytes", int(out.PodJSONBytes), "took", time.Since(t0).Round(time.Millisecond))
	if failed := out.Failed; failed > 0 {
		first := pods.FirstError
		if first == nil {
			first = cms.FirstError
		}
		if failed*100 > l.Pods+l.ConfigMaps {
			return nil, fmt.Errorf("cannot seed %s: %d writes failed, first: %w", t.Name, failed, first)
		}
		log.Warn("some seed writes failed", "target", t.Name, "failed", failed, "first", first)
	}
	return out, nil
}

// cleanup deletes the harness's pods (at once: no kubelet confirms a
// graceful deletion), ConfigMaps and namespaces.
func (s *Suite) cleanup(ctx context.Context, t *target.Target) {
	log := s.cfg.Logger
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	nss, err := t.Proto.CoreV1().Namespaces().List(ctx, listBench())
	if err != nil {
		log.Warn("cleanup: cannot list namespaces", "target", t.Name, "err", err)
		return
	}
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.Name, s.cfg.Prefix+"-") {
			continue
		}
		if err := deleteNamespace(ctx, t, ns.Name); err != nil {
			log.Warn("cleanup: cannot delete", "target", t.Name, "namespace", ns.Name, "err", err)
		}
	}
	log.Info("cleaned up", "target", t.Name, "namespaces", len(nss.Items))
}

func hostInfo() report.Host {
	h, _ := os.Hostname()
	return report.Host{Hostname: h, CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
}
