package scenario

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/bench/internal/load"
	"github.com/kgate/kgate/bench/internal/objects"
	"github.com/kgate/kgate/bench/internal/seed"
	"github.com/kgate/kgate/bench/internal/target"
)

// SentAnnotation carries a write's send time (Unix nanoseconds) to the
// watchers, which measure write-to-receipt latency from it.
const SentAnnotation = "bench.kgate.io/sent-unix-nano"

// watchFanout has W watchers on one namespace while writers update
// ConfigMaps there at E events/s.
type watchFanout struct {
	Common       // Concurrency writers, Rate = events (writes) per second
	watchers int // W
	clients  int // connections the watchers are spread over (0: one each)
	objects  int // ConfigMaps written round-robin
	size     int // their data size
	drain    time.Duration
}

func newWatch(c Common, a *args, d Defaults) []Scenario {
	c.Rate = a.float("events", d.WatchEvents)
	c.Concurrency = a.int("c", 4)
	w := &watchFanout{
		Common:   c,
		watchers: a.int("watchers", d.Watchers),
		clients:  a.int("clients", 1),
		objects:  a.int("objects", 32),
		size:     a.int("size", d.ConfigMapBytes),
		drain:    a.duration("drain", 5*time.Second),
	}
	if w.Rate <= 0 {
		w.Rate = 100
	}
	w.Concurrency = min(w.Concurrency, w.objects)
	return []Scenario{w}
}

// Name tells watchers and clients apart, so a suite can hold several.
func (w *watchFanout) Name() string {
	return fmt.Sprintf("watch-fanout/%dw/%dc", w.watchers, w.spread())
}
func (w *watchFanout) Kind() string { return "watch" }
func (w *watchFanout) Description() string {
	return fmt.Sprintf("%d watchers on one namespace from %s, %s ConfigMap updates/s (%d writers); ops = events delivered, latency = write sent → event received", w.watchers, w.from(), ftoa(w.Rate), w.Concurrency)
}

// from says how the watchers share clients.
func (w *watchFanout) from() string {
	switch n := w.spread(); n {
	case 1:
		return "one client"
	case w.watchers:
		return "a client each"
	default:
		return itoa(n) + " clients"
	}
}

// spread is the number of clients, each on connections of its own.
func (w *watchFanout) spread() int {
	if w.clients <= 0 || w.clients > w.watchers {
		return w.watchers
	}
	return w.clients
}
func (w *watchFanout) Params() map[string]string {
	p := w.params()
	p["watchers"] = itoa(w.watchers)
	p["clients"] = itoa(w.spread())
	p["events"] = ftoa(w.Rate) + "/s"
	p["objects"] = itoa(w.objects)
	p["size"] = itoa(w.size)
	delete(p, "rate")
	p["writers"] = p["concurrency"]
	delete(p, "concurrency")
	return p
}
func (w *watchFanout) Etcd() bool   { return false }
func (w *watchFanout) Seeded() bool { return false }

func (w *watchFanout) Run(ctx context.Context, env *Env) (*Outcome, error) {
	client := env.Target.Proto
	ns := env.Prefix + "-watch"
	if err := seed.Namespaces(ctx, client, []string{ns}); err != nil {
		return nil, err
	}
	// Each writer owns the ConfigMaps i with i mod writers == its index
	// and keeps their latest version, so updates do not conflict.
	latest := make([]*corev1.ConfigMap, w.objects)
	for i := range latest {
		name := fmt.Sprintf("watch-%03d", i)
		cm, err := client.CoreV1().ConfigMaps(ns).Create(ctx, objects.ConfigMap(ns, name, "watch", w.size), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cm, err = client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("cannot prepare ConfigMap %s/%s: %w", ns, name, err)
		}
		latest[i] = cm
	}
	l, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", ns, err)
	}

	// Events come in bursts of one per watcher per write: count at least
	// ten writes per interval so the timeline shows rate, not aliasing.
	interval := max(load.DefaultInterval(w.Duration), time.Duration(10/w.Rate*float64(time.Second)))
	// The writers keep the shared client; the watchers get clients (and
	// connections) of their own when asked to.
	clients := []kubernetes.Interface{client}
	if n := w.spread(); n > 1 {
		clients = make([]kubernetes.Interface, n)
		for i := range clients {
			cs, closeIdle, err := env.Target.Separate(target.Protobuf)
			if err != nil {
				return nil, err
			}
			defer closeIdle()
			clients[i] = cs
		}
	}
	start := time.Now()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ws := make([]*watcher, w.watchers)
	var wg sync.WaitGroup
	ready := make(chan error, w.watchers)
	for i := range ws {
		ws[i] = &watcher{client: clients[i%len(clients)], ns: ns, rv: l.ResourceVersion, start: start, res: load.NewResult(w.Duration, interval)}
		wg.Go(func() { ws[i].run(wctx, ready) })
	}
	for range ws {
		if err := <-ready; err != nil {
			stop()
			wg.Wait()
			return nil, fmt.Errorf("cannot start watchers: %w", err)
		}
	}

	opts := w.options()
	opts.Interval = interval
	writes, err := load.Run(ctx, opts, func(ctx context.Context, wk int, seq int64) error {
		per := (w.objects - wk + w.Concurrency - 1) / w.Concurrency
		i := wk + int(seq%int64(per))*w.Concurrency
		cm := latest[i].DeepCopy()
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[SentAnnotation] = strconv.FormatInt(time.Now().UnixNano(), 10)
		got, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := client.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{}); gerr == nil {
				latest[i] = fresh
			}
		}
		if err != nil {
			return err
		}
		latest[i] = got
		return nil
	})
	if err != nil {
		stop()
		wg.Wait()
		return nil, err
	}
	// Wait until every watcher saw every successful write, or the drain
	// time passed; what is missing then is lost.
	want := int64(writes.Latency.Count())
	deadline := time.Now().Add(w.drain)
	for time.Now().Before(deadline) {
		all := true
		for _, x := range ws {
			all = all && x.received.Load() >= want
		}
		if all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()

	res := load.NewResult(w.Duration, interval)
	var received int64
	for _, x := range ws {
		res.Merge(x.res)
		received += x.received.Load()
	}
	res.Elapsed = max(writes.Elapsed, w.Duration)
	lost := max(want*int64(w.watchers)-received, 0)
	out := &Outcome{Result: res, Extra: map[string]float64{
		"writes_per_s":    writes.Throughput(),
		"write_p50_ms":    ms(writes.Latency.Quantile(0.5)),
		"write_p99_ms":    ms(writes.Latency.Quantile(0.99)),
		"write_errors":    float64(writes.Errors),
		"lost_events":     float64(lost),
		"delivered_ratio": float64(received) / max(float64(want*int64(w.watchers)), 1),
	}}
	for code, n := range writes.ByCode {
		res.ByCode["write "+code] += n
		res.Errors += n
	}
	return out, nil
}

// watcher is one watch connection; it re-watches from the last seen
// resourceVersion when the server ends the watch.
type watcher struct {
	client   kubernetes.Interface
	ns, rv   string
	start    time.Time
	res      *load.Result // owned by run's goroutine until it returns
	received atomic.Int64
}

func (x *watcher) run(ctx context.Context, ready chan<- error) {
	first := true
	for ctx.Err() == nil {
		wi, err := x.client.CoreV1().ConfigMaps(x.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: x.rv, AllowWatchBookmarks: true})
		if first {
			ready <- err
			first = false
			if err != nil {
				return
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				x.res.Fail(err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		x.consume(ctx, wi)
		wi.Stop()
	}
}

func (x *watcher) consume(ctx context.Context, wi watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					x.res.Fail(errors.New("watch closed by the server"))
				}
				return
			}
			now := time.Now()
			switch ev.Type {
			case watch.Error:
				x.res.Fail(apierrors.FromObject(ev.Object))
				if status, ok := ev.Object.(*metav1.Status); ok && status.Code == 410 {
					x.rv = "" // expired: start over from now
				}
				return
			case watch.Bookmark, watch.Added, watch.Modified, watch.Deleted:
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			x.rv = cm.ResourceVersion
			if ev.Type != watch.Modified {
				continue
			}
			sent, err := strconv.ParseInt(cm.Annotations[SentAnnotation], 10, 64)
			if err != nil || sent < x.start.UnixNano() {
				continue // not a write of this run
			}
			x.res.Observe(now.Sub(time.Unix(0, sent)), now.Sub(x.start))
			x.received.Add(1)
		}
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
