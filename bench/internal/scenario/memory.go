package scenario

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/bench/internal/load"
	"github.com/kgate/kgate/bench/internal/seed"
	"github.com/kgate/kgate/bench/internal/stats"
	"github.com/kgate/kgate/bench/internal/target"
)

// memory loads pods through the API and reports the server's heap and
// RSS per object against the objects' JSON size. The pods are loaded in
// as many equal increments as there are runs, each run one increment.
// While loading, heap and RSS are sampled against the number of objects
// written; bytes per object is the least-squares slope, which averages
// out the garbage collector's sawtooth that a before/after difference
// would catch at random. The pods are deleted after the last run.
type memory struct {
	Common
	pods       int
	namespaces int
	every      time.Duration
	keep       bool

	// samples are each target's readings so far (runs are sequential).
	mu      sync.Mutex // guards samples
	samples map[string]*memSamples
}

// memSamples are readings against objects loaded.
type memSamples struct {
	heapX, heapY []float64
	rssX, rssY   []float64
}

func newMemory(c Common, a *args, d Defaults) []Scenario {
	m := &memory{
		Common:     c,
		pods:       a.int("pods", d.MemoryPods),
		namespaces: a.int("namespaces", 10),
		every:      a.duration("sample", 250*time.Millisecond),
		keep:       a.str("keep", "false") == "true",
		samples:    map[string]*memSamples{},
	}
	m.Concurrency = a.int("c", 16)
	return []Scenario{m}
}

func (m *memory) Name() string { return "memory" }
func (m *memory) Kind() string { return "memory" }
func (m *memory) Description() string {
	return fmt.Sprintf("load %d pods (create + UpdateStatus) in one increment per run, sampling %s and RSS every %s; bytes per object = slope of memory over objects written; ops = pods written", m.pods, target.HeapMetric, m.every)
}
func (m *memory) Params() map[string]string {
	return map[string]string{"pods": itoa(m.pods), "namespaces": itoa(m.namespaces), "concurrency": itoa(m.Concurrency),
		"sample": m.every.String(), "keep": fmt.Sprint(m.keep)}
}
func (m *memory) Etcd() bool   { return false }
func (m *memory) Seeded() bool { return false }

func (m *memory) Run(ctx context.Context, env *Env) (*Outcome, error) {
	client := env.Target.Proto
	layout := seed.Layout{Prefix: env.Prefix, Set: "mem-" + dnsLabel(env.Target.Name), Namespaces: m.namespaces, Pods: m.pods}
	runs := max(env.Runs, 1)
	from, to := m.pods*env.Run/runs, m.pods*(env.Run+1)/runs
	if err := seed.Namespaces(ctx, client, layout.AllNamespaces()); err != nil {
		return nil, err
	}
	m.mu.Lock()
	all := m.samples[env.Target.Name]
	if all == nil || env.Run == 0 {
		all = &memSamples{}
		m.samples[env.Target.Name] = all
	}
	m.mu.Unlock()
	if env.Run == runs-1 && !m.keep {
		defer m.cleanup(env, layout)
	}

	// Objects loaded before this run count from `from`.
	var written atomic.Int64
	var run memSamples
	sample := func(ctx context.Context) {
		x := float64(from) + float64(written.Load())
		if h, ok, err := env.Target.Heap(ctx); err == nil && ok {
			run.heapX, run.heapY = append(run.heapX, x), append(run.heapY, h)
		}
		if p, ok := env.Target.Process(); ok {
			run.rssX, run.rssY = append(run.rssX, x), append(run.rssY, float64(p.RSSBytes))
		}
	}
	sample(ctx)
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(m.every)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				sample(sctx)
			}
		}
	})
	s, err := seed.Pods(ctx, seed.Config{Client: client, Layout: layout, Concurrency: m.Concurrency, Progress: env.Progress, Written: &written}, from, to)
	stop()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if s.Failed > 0 {
		env.Log.Warn("memory: some pods were not written", "failed", s.Failed, "err", s.FirstError)
	}
	// A consistent read returns once the server's cache has caught up
	// with everything written; a server may answer 429 meanwhile.
	for deadline := time.Now().Add(time.Minute); ; {
		_, err := client.CoreV1().Pods(layout.Namespace(0)).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("cannot read back: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	sample(ctx)
	all.heapX, all.heapY = append(all.heapX, run.heapX...), append(all.heapY, run.heapY...)
	all.rssX, all.rssY = append(all.rssX, run.rssX...), append(all.rssY, run.rssY...)

	res := load.NewResult(s.Took, load.DefaultInterval(s.Took))
	res.Ops = int64(s.Created + s.Failed)
	res.Errors = int64(s.Failed)
	for k, v := range s.Errors {
		res.ByCode[k] = v
	}
	res.Latency = s.Latency
	res.Elapsed = s.Took
	out := &Outcome{Result: res, Extra: map[string]float64{"objects_loaded": float64(to)}}
	if s.Created == 0 {
		return out, nil
	}
	js := s.PodJSONBytes
	out.Extra["json_bytes_per_object"] = js
	figures := func(name string, xs, ys, allX, allY []float64) {
		if v, ok := stats.Slope(xs, ys); ok {
			out.Extra[name+"_bytes_per_object"] = v
			out.Extra[name+"_to_json"] = v / js
		}
		if v, ok := stats.Slope(allX, allY); ok && env.Run > 0 {
			out.Extra[name+"_bytes_per_object_cumulative"] = v
			out.Extra[name+"_to_json_cumulative"] = v / js
		}
		if len(ys) > 0 {
			out.Extra[name+"_mb"] = ys[len(ys)-1] / (1 << 20)
		}
		out.Extra[name+"_samples"] = float64(len(ys))
	}
	figures("heap", run.heapX, run.heapY, all.heapX, all.heapY)
	figures("rss", run.rssX, run.rssY, all.rssX, all.rssY)
	return out, nil
}

// cleanup deletes the loaded pods (at once) so that later scenarios see
// the server as it was.
func (m *memory) cleanup(env *Env, layout seed.Layout) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	zero := int64(0)
	for _, ns := range layout.AllNamespaces() {
		err := env.Target.Proto.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err != nil {
			env.Log.Warn("memory: cannot delete the loaded pods", "namespace", ns, "err", err)
		}
	}
}

// dnsLabel makes a target name usable in a namespace name.
func dnsLabel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 20 {
		out = out[:20]
	}
	if out == "" {
		out = "t"
	}
	return out
}
