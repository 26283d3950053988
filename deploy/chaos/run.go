package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/deploy/chaos/report"
	dc "github.com/kgate/kgate/deploy/dockercluster"
	"github.com/kgate/kgate/deploy/watchcheck"
)

// Namespace holds the workload's ConfigMaps.
const Namespace = "chaos"

// Config is one chaos run.
type Config struct {
	// Cluster is the running cluster the faults are injected into.
	// Required.
	Cluster *dc.Cluster
	// Seed orders the faults and drives the workload.
	Seed int64
	// Duration: no fault starts after it; default 10m.
	Duration time.Duration
	// Hold is how long each fault lasts; default 15s.
	Hold time.Duration
	// Faults, when set, keeps only the faults whose name matches.
	Faults *regexp.Regexp
	// Writers, Keys (per writer), Readers, Watchers, Informers;
	// defaults 2, 6, 2, 6, 2.
	Writers, Keys, Readers, Watchers, Informers int
	// Results is the directory of the report. Required.
	Results string
	// Logger; default discards.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Cluster == nil || c.Results == "" {
		return errors.New("cannot run chaos: Cluster and Results are required")
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Duration, 10 * time.Minute}, {&c.Hold, 15 * time.Second}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return errors.New("cannot run chaos: negative duration")
		}
	}
	for _, d := range []struct {
		v        *int
		def, top int
	}{{&c.Writers, 2, 9}, {&c.Keys, 6, 100}, {&c.Readers, 2, 50}, {&c.Watchers, 6, 1000}, {&c.Informers, 2, 20}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 1 || *d.v > d.top {
			return fmt.Errorf("cannot run chaos: %d workers: want 1-%d", *d.v, d.top)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// watchSpecs are the watchers' selectors, in turn.
var watchSpecs = []struct{ ns, label, field string }{
	{Namespace, "", ""},
	{Namespace, "app=a", ""},
	{"", "", "metadata.namespace=" + Namespace},
	{Namespace, "app!=a", ""},
}

// Run runs the workload, injects every fault in the seed's order until
// Duration is over, checks everything and writes the report. It returns
// the report; its Problems list every violation. An error means the run
// itself could not be made.
func Run(ctx context.Context, cfg Config) (*report.Run, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, log := cfg.Cluster, cfg.Logger
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6b67617465))
	su, err := prepare(ctx, c, "kgate-chaos", cfg.Results, false)
	if err != nil {
		return nil, err
	}
	defer su.close()
	gws, cli, truth, from, hist := su.gws, su.cli, su.truth, su.from, su.hist
	rec := newRecorder()
	run := &report.Run{Seed: cfg.Seed, Started: time.Now(), Cluster: fmt.Sprintf("%d etcd, %d NATS, %d cache nodes, %d gateways",
		c.Members(dc.Etcd), c.Members(dc.NATS), c.Members(dc.CacheNode), c.Members(dc.Gateway))}

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var load sync.WaitGroup
	for i := range cfg.Writers {
		w := &writer{id: i, gws: gws, truth: truth, rec: rec, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i))),
			keys: cfg.Keys, pause: 40 * time.Millisecond, model: map[string]*watchcheck.Object{}, unsettled: map[string]time.Time{}, next: i}
		load.Go(func() { w.run(loadCtx) })
	}
	for i := range cfg.Readers {
		r := &reader{id: i, gws: gws, rec: rec, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i))),
			names: names(cfg.Writers, cfg.Keys), pause: 40 * time.Millisecond, next: i}
		load.Go(func() { r.run(loadCtx) })
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watching sync.WaitGroup
	watchers := make([]*watcher, cfg.Watchers)
	for i := range watchers {
		s := watchSpecs[i%len(watchSpecs)]
		f, err := watchcheck.ParseFilter(s.ns, s.label, s.field)
		if err != nil {
			return nil, err
		}
		watchers[i] = &watcher{id: i, gws: gws, rec: rec, ns: s.ns, label: s.label, field: s.field, filter: f, gw: i % gws.n(), through: from}
		watching.Go(func() { watchers[i].run(watchCtx) })
	}
	informers := make([]*informer, cfg.Informers)
	for i := range informers {
		informers[i] = newInformer(i, gws, rec)
		watching.Go(func() { informers[i].run(watchCtx) })
	}
	stopAll := func() {
		stopLoad()
		load.Wait()
		stopWatch()
		watching.Wait()
	}

	// caughtUp: etcd's history has the write at rev, and every watcher
	// (but skip) has seen every event of it up to rev.
	caughtUp := func(rev int64, skip *watcher) error {
		if hist.LastRev() < rev {
			return fmt.Errorf("etcd's history at %d, waiting for %d", hist.LastRev(), rev)
		}
		ws := hist.Writes()
		for _, w := range watchers {
			if w == skip {
				continue
			}
			want := w.filter.Expected(ws, from)
			var last int64
			for _, e := range want {
				if e.RV <= rev {
					last = e.RV
				}
			}
			if w.at() < last {
				return fmt.Errorf("%s at %d, its last event by %d at %d", w.desc(), w.at(), rev, last)
			}
		}
		return nil
	}
	// recovered waits until a write acknowledged after since is seen by
	// every watcher.
	recovered := func(since time.Time, skip *watcher, limit time.Duration) error {
		err := poll(ctx, limit, func() error {
			rev := rec.firstAckAfter(since)
			if rev == 0 {
				return errors.New("no write acknowledged yet")
			}
			return caughtUp(rev, skip)
		})
		if err != nil {
			return fmt.Errorf("not recovered %w", err)
		}
		return nil
	}
	if err := recovered(time.Now(), nil, 3*time.Minute); err != nil {
		stopAll()
		return nil, fmt.Errorf("cannot start the workload: %w", err)
	}
	if err := poll(ctx, 3*time.Minute, func() error {
		for _, in := range informers {
			if !in.synced() {
				return fmt.Errorf("%s not synced", in.desc())
			}
		}
		return nil
	}); err != nil {
		stopAll()
		return nil, fmt.Errorf("cannot start the informers: %w", err)
	}
	log.Info("workload running", "writers", cfg.Writers, "readers", cfg.Readers, "watchers", cfg.Watchers, "informers", cfg.Informers)

	var relistOK []int // faults after which watchers may list again
	fl := &faulter{c: c, rng: rng, slow: watchers[len(watchers)-1].slow, leaderOf: func(ctx context.Context) (int, error) { return etcdLeader(ctx, c, cli) }}
	// Every fault in the seed's order, then again in another, until
	// Duration is over. A pass that could inject nothing ends the run.
	var faults []fault
	skipped := map[string]bool{}
	ran := 1
	for ctx.Err() == nil && time.Since(run.Started) < cfg.Duration {
		if len(faults) == 0 {
			if ran == 0 {
				break
			}
			ran = 0
			faults = fl.all(cfg.Faults)
			continue
		}
		ft := faults[0]
		faults = faults[1:]
		if ft.available != nil {
			if err := ft.available(ctx); err != nil {
				if !skipped[ft.name] {
					log.Warn("fault skipped", "name", ft.name, "err", err)
					run.Skipped = append(run.Skipped, fmt.Sprintf("%s: %v", ft.name, err))
				}
				skipped[ft.name] = true
				continue
			}
		}
		ran++
		fr := report.Fault{Name: ft.name, Injected: time.Now()}
		if ft.relistOK {
			relistOK = append(relistOK, len(run.Faults))
		}
		log.Info("fault", "name", ft.name)
		if err := ft.inject(ctx); err != nil {
			stopAll()
			return nil, fmt.Errorf("cannot inject %q: %w", ft.name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(cfg.Hold):
		}
		if err := ft.heal(ctx); err != nil {
			rec.problem("%s: cannot heal: %v", ft.name, err)
		}
		fr.Healed = time.Now()
		if err := recovered(fr.Healed, nil, 3*time.Minute); err != nil {
			rec.problem("%s: %v", ft.name, err)
		} else {
			fr.Recovered = time.Now()
		}
		if fr.Recovered.IsZero() {
			log.Warn("not recovered", "name", ft.name)
		} else {
			log.Info("recovered", "name", ft.name, "heal", fr.Recovered.Sub(fr.Healed).Round(time.Millisecond))
		}
		run.Faults = append(run.Faults, fr)
	}
	// The end: no more writes; every watcher sees every one.
	stopLoad()
	load.Wait()
	final := rec.ackedRev()
	// The end: no more writes; every watcher sees every one, and every
	// informer's store ends as etcd's state.
	ended := time.Now()
	if err := poll(ctx, 2*time.Minute, func() error { return caughtUp(final, nil) }); err != nil {
		rec.problem("the end: %v", err)
	}
	want := watchcheck.StateAt(hist.Writes(), final)
	if err := poll(ctx, 2*time.Minute-time.Since(ended), func() error {
		for _, in := range informers {
			if d := in.differs(want); d != "" {
				return errors.New(d)
			}
		}
		return nil
	}); err != nil {
		rec.problem("the end: %v", err)
	}
	stopWatch()
	watching.Wait()
	if err := su.close(); err != nil {
		rec.problem("etcd's history: %v", err)
	}
	run.Ended = time.Now()
	return finish(cfg, run, rec, hist.Writes(), from, watchers, informers, relistOK)
}

// poll calls check every 100ms until it returns nil, ctx ends or limit
// passes; then it returns check's last error.
func poll(ctx context.Context, limit time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, max(limit, 0))
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", limit.Round(time.Second), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// finish checks what was recorded and writes the report.
func finish(cfg Config, run *report.Run, rec *recorder, writes []watchcheck.Write, from int64, watchers []*watcher, informers []*informer, relistOK []int) (*report.Run, error) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	v := &verdicts{}
	checkWrites(v, writes, rec.acks)
	for _, w := range watchers {
		checkWatcher(v, w, writes, from, rec.ackAt)
	}
	for _, in := range informers {
		v.relists = append(v.relists, in.relists()...)
	}
	if err := checkReads(v, writes, rec.kv, rec.lists, filepath.Join(cfg.Results, "linearizability.html")); err != nil {
		rec.problems = append(rec.problems, problem{time.Now(), err.Error()})
	}
	// Relists a fault allowed are reported in its name, not as
	// violations.
	for _, i := range relistOK {
		f := &run.Faults[i]
		end := f.Recovered
		if end.IsZero() {
			end = f.Healed
		}
		var kept []finding
		n := 0
		for _, r := range v.relists {
			if !r.At.Before(f.Injected) && !r.At.After(end) {
				n++
			} else {
				kept = append(kept, r)
			}
		}
		v.relists = kept
		f.Name += fmt.Sprintf(" — every replica of some range lost: %d watch(es) listed again, as after a kube-apiserver restart", n)
	}
	for i := range run.Faults {
		f := &run.Faults[i]
		end := f.Recovered
		if end.IsZero() {
			end = f.Healed
		}
		f.Checks = v.window(f.Injected, end, rec.requests, rec.stale, rec.falses)
		if v.linearizable != "ok" {
			// Which windows: the reads up to the window's end alone.
			// Reads that returned by the window's end, and every write
			// called by then (one still running may have taken effect).
			var prefix []KVOp
			for _, op := range rec.kv {
				if (op.Write && !op.Call.After(end)) || (!op.Write && !op.Return.After(end)) {
					prefix = append(prefix, op)
				}
			}
			verdict, _ := Linearizable(prefix, time.Minute, "")
			if countIn(v.lists, f.Injected, end) > 0 {
				verdict = "violation"
			}
			f.Checks.Linearizable = verdict
		}
	}
	run.Totals = v.window(time.Time{}, time.Time{}, rec.requests, rec.stale, rec.falses)
	run.Requests, run.Lags = rec.requests, rec.lags
	var all []finding
	for _, p := range rec.problems {
		all = append(all, finding{p.At, p.What})
	}
	all = append(all, v.problems()...)
	for _, p := range all {
		run.Problems = append(run.Problems, fmt.Sprintf("+%v %s", p.At.Sub(run.Started).Round(time.Millisecond), p.What))
	}
	if v.linearizable == "violation" {
		run.Problems = append(run.Problems, "consistent reads are not linearizable (porcupine; linearizability.html)")
		run.Problems = append(run.Problems, StaleGets(rec.kv)...)
	}
	if err := writeJSON(filepath.Join(cfg.Results, "operations.json"), rec.kv); err != nil {
		return run, err
	}
	if err := report.Write(cfg.Results, run); err != nil {
		return run, err
	}
	return run, nil
}

// createNamespace creates the workload's namespace through the first
// gateway that answers.
func createNamespace(ctx context.Context, gws *gateways) error {
	var errs []error
	for i := range gws.n() {
		_, err := gws.client(i).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("cannot create namespace %s: %w", Namespace, errors.Join(errs...))
}

// etcdLeader is the index of etcd's leader, asked of each member.
func etcdLeader(ctx context.Context, c *dc.Cluster, cli *clientv3.Client) (int, error) {
	var errs []error
	for i := range c.Members(dc.Etcd) {
		st, err := cli.Status(ctx, c.HostAddr(dc.Etcd, i))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Leader == st.Header.MemberId {
			return i, nil
		}
	}
	return 0, fmt.Errorf("cannot find etcd's leader: %w", errors.Join(errs...))
}

// isGone: the watch cannot start where it was asked (410).
func isGone(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }

// writeJSON keeps v for a look after the run (the operations the
// linearizability checker saw).
func writeJSON(file string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", file, err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", file, err)
	}
	return nil
}
