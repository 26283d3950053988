package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dc "github.com/kgate/kgate/deploy/dockercluster"
	"github.com/kgate/kgate/deploy/watchcheck"
)

// SoakConfig is one soak run: a steady load without faults, the memory
// and goroutines of every component sampled as it goes.
type SoakConfig struct {
	// Cluster is the running cluster. Required.
	Cluster *dc.Cluster
	// Duration of the load; default 1h.
	Duration time.Duration
	// Watchers, each selecting one of Shards shards of the ConfigMaps;
	// defaults 10,000 and 1,000.
	Watchers, Shards int
	// WritesPerSecond over Writers concurrent writers; defaults 500 and
	// 25.
	WritesPerSecond float64
	Writers         int
	// Sample is the sampling interval; default 1m.
	Sample time.Duration
	// Results is the directory of soak.md. Required.
	Results string
	// Seed drives the workload.
	Seed int64
	// Logger; default discards.
	Logger *slog.Logger
}

func (c *SoakConfig) validate() error {
	if c.Cluster == nil || c.Results == "" {
		return errors.New("cannot soak: Cluster and Results are required")
	}
	if c.Duration == 0 {
		c.Duration = time.Hour
	}
	if c.Watchers == 0 {
		c.Watchers = 10000
	}
	if c.Shards == 0 {
		c.Shards = 1000
	}
	if c.WritesPerSecond == 0 {
		c.WritesPerSecond = 500
	}
	if c.Writers == 0 {
		c.Writers = 25
	}
	if c.Sample == 0 {
		c.Sample = time.Minute
	}
	if c.Duration < 0 || c.Watchers < 0 || c.Shards < 0 || c.WritesPerSecond < 0 || c.Writers < 0 || c.Sample < 0 {
		return errors.New("cannot soak: negative setting")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Sample is one component's use at one moment.
type Sample struct {
	At         time.Time
	Member     string
	Memory     int64 // bytes, the container's cgroup
	Goroutines int   // -1 when the component does not say
}

// SoakResult is what a soak run measured.
type SoakResult struct {
	Samples  []Sample
	Writes   int
	Events   int64
	Problems []string
}

// Soak runs the steady load, samples every Sample, checks that every
// watcher got every event of its shard in order, and that memory and
// goroutines stayed flat: at the end no more than a quarter (plus a
// little) above what they were once the load had warmed up.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, log := cfg.Cluster, cfg.Logger
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x736f616b))
	// Ten thousand watches are ten thousand connections: over the
	// bridge, as a published port's userland proxy gives out under them.
	su, err := prepare(ctx, c, "kgate-soak", cfg.Results, true)
	if err != nil {
		return nil, err
	}
	defer su.close()
	gws, truth, from, hist := su.gws, su.truth, su.from, su.hist
	res := &SoakResult{}
	rec := newRecorder()

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watching sync.WaitGroup
	counters := make([]*counter, cfg.Watchers)
	for i := range counters {
		counters[i] = &counter{gws: gws, shard: strconv.Itoa(i % cfg.Shards), gw: i % gws.n(), through: from}
		watching.Go(func() { counters[i].run(watchCtx) })
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var load sync.WaitGroup
	limit := rate.NewLimiter(rate.Limit(cfg.WritesPerSecond), cfg.Writers)
	keys := max(1, cfg.Shards*4/cfg.Writers)
	for i := range cfg.Writers {
		w := &writer{id: i, gws: gws, truth: truth, rec: rec, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i))),
			keys: keys, limit: limit, shards: cfg.Shards, model: map[string]*watchcheck.Object{}, unsettled: map[string]time.Time{}, next: i}
		load.Go(func() { w.run(loadCtx) })
	}
	log.Info("soak running", "watchers", cfg.Watchers, "writes/s", cfg.WritesPerSecond, "for", cfg.Duration)

	t0 := time.Now()
	sample := func() {
		// A read may time out while ten thousand watches connect: tried
		// three times before it counts.
		ss, err := sampleCluster(ctx, c, gws)
		for try := 1; err != nil && try < 3 && ctx.Err() == nil; try++ {
			time.Sleep(5 * time.Second)
			ss, err = sampleCluster(ctx, c, gws)
		}
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("+%v: %v", time.Since(t0).Round(time.Second), err))
		}
		res.Samples = append(res.Samples, ss...)
		log.Info("sampled", "at", time.Since(t0).Round(time.Second), "writes", len(hist.Writes()), "events", totalEvents(counters))
	}
	sample()
	tick := time.NewTicker(cfg.Sample)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			sample()
			done = time.Since(t0) >= cfg.Duration
		}
	}
	tick.Stop()
	stopLoad()
	load.Wait()

	// Every watcher gets every event of its shard since it started.
	final := rec.ackedRev()
	want := func() map[string]int {
		for hist.LastRev() < final && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		m := map[string]int{}
		for _, w := range hist.Writes() {
			m[shardOf(strings.TrimPrefix(w.Key(), Namespace+"/"), cfg.Shards)]++
		}
		return m
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		behind := 0
		for _, k := range counters {
			if int(k.events.Load()) < want[k.shard] {
				behind++
			}
		}
		if behind == 0 || time.Now().After(deadline) {
			if behind > 0 {
				res.Problems = append(res.Problems, fmt.Sprintf("%d watchers short of their shard's events 2 minutes after the last write", behind))
			}
			break
		}
		time.Sleep(time.Second)
	}
	stopWatch()
	watching.Wait()
	if err := su.close(); err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("etcd's history: %v", err))
	}
	for _, k := range counters {
		if n := k.bad.Load(); n > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("watcher of shard %s: %d events out of order or repeated", k.shard, n))
		}
		if n := int(k.events.Load()); n > want[k.shard] {
			res.Problems = append(res.Problems, fmt.Sprintf("watcher of shard %s: %d events, its shard had %d writes", k.shard, n, want[k.shard]))
		}
	}
	res.Writes, res.Events = len(hist.Writes()), totalEvents(counters)
	res.Problems = append(res.Problems, flat(res.Samples, t0.Add(cfg.Duration/4))...)
	if err := writeSoak(cfg, res); err != nil {
		return res, err
	}
	return res, nil
}

func totalEvents(cs []*counter) int64 {
	var n int64
	for _, c := range cs {
		n += c.events.Load()
	}
	return n
}

// counter is a light watcher: one shard's ConfigMaps, resumed from the
// last revision on the next gateway when a stream ends; it keeps counts,
// not events.
type counter struct {
	gws     *gateways
	shard   string
	gw      int
	through int64
	events  atomic.Int64
	bad     atomic.Int64 // events at or below a revision already seen
}

func (k *counter) run(ctx context.Context) {
	timeout := int64(3600)
	for ctx.Err() == nil {
		gw := k.gw
		k.gw = (k.gw + 1) % k.gws.n()
		wi, err := k.gws.watcher(gw).CoreV1().ConfigMaps(Namespace).Watch(ctx, metav1.ListOptions{
			ResourceVersion: strconv.FormatInt(k.through, 10), AllowWatchBookmarks: true, LabelSelector: "shard=" + k.shard, TimeoutSeconds: &timeout,
		})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			e := watchcheck.EventOf(ev)
			if e.Type == "ERROR" {
				if ctx.Err() != nil {
					break // client-go reports the cancelled read
				}
				k.bad.Add(1)
				if e.Code == 410 {
					// Its start is gone: nothing it counts from here
					// would be checkable; it ends short.
					wi.Stop()
					return
				}
				break
			}
			if e.Type != "BOOKMARK" {
				if e.RV <= k.through {
					k.bad.Add(1)
				}
				k.events.Add(1)
			}
			k.through = max(k.through, e.RV)
		}
		wi.Stop()
	}
}

// sampleCluster reads every container's memory and the kgate
// components' goroutines.
func sampleCluster(ctx context.Context, c *dc.Cluster, gws *gateways) ([]Sample, error) {
	now := time.Now()
	mem, err := c.MemoryUsage(ctx)
	if err != nil {
		return nil, err
	}
	goroutines := map[string]int{}
	var errs []error
	for i := range c.Members(dc.Gateway) {
		b, err := gws.client(i).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		goroutines[c.Name(dc.Gateway, i)] = gauge(string(b), "go_goroutines")
	}
	for i := range c.Members(dc.CacheNode) {
		b, err := c.CacheNodeMetrics(ctx, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		goroutines[c.Name(dc.CacheNode, i)] = gauge(b, "go_goroutines")
	}
	var out []Sample
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range mem {
			if !yield(k) {
				return
			}
		}
	}) {
		g, ok := goroutines[name]
		if !ok {
			g = -1
		}
		out = append(out, Sample{At: now, Member: name, Memory: mem[name], Goroutines: g})
	}
	return out, errors.Join(errs...)
}

// gauge reads an unlabelled gauge from Prometheus text; -1 when absent.
func gauge(text, name string) int {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int(f)
			}
		}
	}
	return -1
}

// flat compares each member's last sample with its first at or after
// warm: memory may grow by a quarter plus 64 MiB, goroutines by a fifth
// plus 100.
func flat(samples []Sample, warm time.Time) []string {
	first, last := map[string]Sample{}, map[string]Sample{}
	for _, s := range samples {
		if _, ok := first[s.Member]; !ok && !s.At.Before(warm) {
			first[s.Member] = s
		}
		last[s.Member] = s
	}
	var out []string
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for k := range first {
			if !yield(k) {
				return
			}
		}
	}) {
		a, b := first[m], last[m]
		if b.Memory > a.Memory+a.Memory/4+64<<20 {
			out = append(out, fmt.Sprintf("%s: memory grew from %d MiB to %d MiB", m, a.Memory>>20, b.Memory>>20))
		}
		if a.Goroutines >= 0 && b.Goroutines > a.Goroutines+a.Goroutines/5+100 {
			out = append(out, fmt.Sprintf("%s: goroutines grew from %d to %d", m, a.Goroutines, b.Goroutines))
		}
	}
	return out
}

// writeSoak writes soak.md: per member, memory and goroutines at the
// first, the warm and the last sample, then every sample.
func writeSoak(cfg SoakConfig, res *SoakResult) error {
	if err := os.MkdirAll(cfg.Results, 0o755); err != nil {
		return fmt.Errorf("cannot write the soak report: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak run\n\n%v, %d watchers over %d shards, %.0f writes/s by %d writers: %d writes, %d events delivered.\n\n",
		cfg.Duration, cfg.Watchers, cfg.Shards, cfg.WritesPerSecond, cfg.Writers, res.Writes, res.Events)
	b.WriteString("| member | memory at start | memory at end | goroutines at start | goroutines at end |\n|---|--:|--:|--:|--:|\n")
	first, last := map[string]Sample{}, map[string]Sample{}
	var members []string
	for _, s := range res.Samples {
		if _, ok := first[s.Member]; !ok {
			first[s.Member] = s
			members = append(members, s.Member)
		}
		last[s.Member] = s
	}
	for _, m := range members {
		fmt.Fprintf(&b, "| %s | %.1f MiB | %.1f MiB | %d | %d |\n", m, float64(first[m].Memory)/(1<<20), float64(last[m].Memory)/(1<<20), first[m].Goroutines, last[m].Goroutines)
	}
	b.WriteString("\n## Problems\n\n")
	if len(res.Problems) == 0 {
		b.WriteString("none\n")
	}
	for _, p := range res.Problems {
		fmt.Fprintf(&b, "- %s\n", p)
	}
	b.WriteString("\n## Samples\n\n| at | member | memory (MiB) | goroutines |\n|---|---|--:|--:|\n")
	for _, s := range res.Samples {
		fmt.Fprintf(&b, "| %s | %s | %.1f | %d |\n", s.At.UTC().Format(time.TimeOnly), s.Member, float64(s.Memory)/(1<<20), s.Goroutines)
	}
	if err := os.WriteFile(filepath.Join(cfg.Results, "soak.md"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("cannot write the soak report: %w", err)
	}
	return nil
}
