package suite

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/bench/internal/objects"
	"github.com/kgate/kgate/bench/internal/procstat"
	"github.com/kgate/kgate/bench/internal/report"
	"github.com/kgate/kgate/bench/internal/scenario"
	"github.com/kgate/kgate/bench/internal/stats"
	"github.com/kgate/kgate/bench/internal/target"
)

// runScenario runs sc Runs times on each target, run i of every target
// back to back, and summarizes.
func (s *Suite) runScenario(ctx context.Context, sc scenario.Scenario, targets []*target.Target, etcd *clientv3.Client, etcdPids []int) (_ report.Scenario, notes []string) {
	out := report.Scenario{Name: sc.Name(), Kind: sc.Kind(), Description: sc.Description(), Params: sc.Params()}
	type side struct {
		name string
		t    *target.Target
		pids []int
		hist stats.Histogram
		tr   report.TargetResult
		err  error // the last failed run's
	}
	var sides []*side
	if sc.Etcd() {
		sides = append(sides, &side{name: "etcd", pids: etcdPids})
	} else {
		for _, t := range targets {
			sides = append(sides, &side{name: t.Name, t: t, pids: t.Pids})
		}
	}
	for _, sd := range sides {
		sd.tr.Target = sd.name
		if sc.Etcd() && etcd == nil {
			sd.tr.Skipped = "no --etcd-endpoints"
		}
	}
	// A server that stopped answering is not measured further.
	ready := func(sd *side) error {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if sd.t != nil {
			return sd.t.Ready(rctx)
		}
		_, err := etcd.Get(rctx, "health-of-kgate-bench")
		return err
	}
	for run := 0; run < s.cfg.Runs && ctx.Err() == nil; run++ {
		for i, sd := range sides {
			if sd.tr.Skipped != "" {
				continue
			}
			if err := ready(sd); err != nil {
				s.cfg.Logger.Error("not ready: skipping", "scenario", sc.Name(), "target", sd.name, "err", err)
				sd.tr.Skipped = fmt.Sprintf("not ready: %v", err)
				continue
			}
			env := &scenario.Env{
				Target: sd.t, Etcd: etcd, Seed: s.cfg.Seed, Prefix: s.cfg.Prefix,
				Run: run, Runs: s.cfg.Runs, ID: fmt.Sprintf("t%d-r%d-%x", i, run, time.Now().UnixNano()&0xffffff),
				Log: s.cfg.Logger.With("scenario", sc.Name(), "target", sd.name), Progress: s.cfg.Progress,
			}
			r, hist, err := measure(ctx, sc, env, sd.pids)
			if err != nil {
				s.cfg.Logger.Error("run failed", "scenario", sc.Name(), "target", sd.name, "run", run+1, "err", err)
				sd.err = err
				if r == nil {
					continue
				}
			}
			sd.hist.Merge(hist)
			sd.tr.Runs = append(sd.tr.Runs, *r)
			s.cfg.Logger.Info(sc.Name(), "target", sd.name, "run", fmt.Sprintf("%d/%d", run+1, s.cfg.Runs),
				"ops/s", report.Num(r.Figures[report.OpsPerS]), "p50_ms", report.Num(r.Figures[report.P50]),
				"p99_ms", report.Num(r.Figures[report.P99]), "errors", r.Figures[report.Errors])
		}
	}
	for _, sd := range sides {
		if sd.tr.Skipped != "" && len(sd.tr.Runs) > 0 {
			// It stopped answering after some runs: keep those.
			notes = append(notes, fmt.Sprintf("%s on %s: %d of %d runs, then %s.", sc.Name(), sd.name, len(sd.tr.Runs), s.cfg.Runs, sd.tr.Skipped))
			sd.tr.Skipped = ""
		}
		if sd.tr.Skipped == "" && len(sd.tr.Runs) == 0 {
			sd.tr.Skipped = fmt.Sprintf("every run failed: %v", sd.err)
		}
		sd.tr.Summarize()
		sd.tr.CDF = cdf(&sd.hist)
		out.Results = append(out.Results, sd.tr)
	}
	out.Compare()
	return out, notes
}

// measure runs one run with the server's and the harness's CPU and RSS
// sampled around it.
func measure(ctx context.Context, sc scenario.Scenario, env *scenario.Env, pids []int) (*report.Run, *stats.Histogram, error) {
	srv0, srvErr := procstat.Sum(pids)
	self0, selfErr := procstat.Read(os.Getpid())
	o, err := sc.Run(ctx, env)
	if o == nil || o.Result == nil {
		if err == nil {
			err = fmt.Errorf("%s returned no result", sc.Name())
		}
		return nil, nil, err
	}
	srv1, srvErr1 := procstat.Sum(pids)
	self1, selfErr1 := procstat.Read(os.Getpid())
	res := o.Result
	ok := float64(res.Latency.Count())
	elapsed := max(res.Elapsed, res.Duration)
	f := map[string]float64{
		report.OpsPerS: res.Throughput(),
		report.P50:     ms(res.Latency.Quantile(0.5)),
		report.P90:     ms(res.Latency.Quantile(0.9)),
		report.P99:     ms(res.Latency.Quantile(0.99)),
		report.Max:     ms(res.Latency.Max()),
		report.Errors:  float64(res.Errors),
	}
	if res.Missed > 0 {
		f[report.Missed] = float64(res.Missed)
	}
	if len(pids) > 0 && srvErr == nil && srvErr1 == nil {
		cpu := srv1.CPUSeconds - srv0.CPUSeconds
		if ok > 0 {
			f[report.ServerCPUPerOp] = cpu * 1000 / ok
		}
		f[report.ServerCPUPerS] = cpu / elapsed.Seconds()
		f[report.ServerRSS] = float64(srv1.RSSBytes) / (1 << 20)
	}
	if selfErr == nil && selfErr1 == nil && ok > 0 {
		f[report.ClientCPUPerOp] = (self1.CPUSeconds - self0.CPUSeconds) * 1000 / ok
	}
	for k, v := range o.Extra {
		f[k] = v
	}
	run := &report.Run{Figures: f, Errors: res.ByCode}
	if len(run.Errors) == 0 {
		run.Errors = nil
	}
	if res.Timeline != nil && res.Latency.Count() > 0 {
		rates := res.Timeline.Rates(res.Duration)
		sum := 0.0
		for _, v := range rates {
			sum += v
		}
		if sum > 0 {
			run.Throughput, run.IntervalS = rates, res.Timeline.Interval().Seconds()
		}
	}
	for code, ex := range res.Example {
		env.Log.Debug("error example", "code", code, "err", ex)
	}
	return run, res.Latency, err
}

func cdf(h *stats.Histogram) []report.CDFPoint {
	var out []report.CDFPoint
	for _, p := range h.CDF(stats.CDFQuantiles()) {
		out = append(out, report.CDFPoint{Q: p.Q, Ms: ms(p.Value)})
	}
	return out
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

func listBench() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: objects.LabelBench + "=true"}
}

// deleteNamespace deletes a harness namespace's pods at once, then the
// namespace (whose finalization needs a namespace controller: kgate's own
// or kube-controller-manager's).
func deleteNamespace(ctx context.Context, t *target.Target, ns string) error {
	zero := int64(0)
	err := t.Proto.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = t.Proto.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
