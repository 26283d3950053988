package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kgate/kgate/bench/internal/load"
	"github.com/kgate/kgate/bench/internal/stats"
)

// HeartbeatCondition is the pod condition mixed's status writers change.
const HeartbeatCondition = "bench.kgate.io/Heartbeat"

// mixed is a controller-like load: K pod informers (list, then watch)
// while workers update the status of seeded pods read from an informer's
// cache. Ops are the status updates; the informers' lag is matched by
// resourceVersion against a table of send times.
type mixed struct {
	Common
	informers int
}

func newMixed(c Common, a *args, d Defaults) []Scenario {
	c.Rate = a.float("rate", 100)
	m := &mixed{Common: c, informers: a.int("informers", d.Informers)}
	m.informers = max(m.informers, 1)
	return []Scenario{m}
}

func (m *mixed) Name() string { return "mixed" }
func (m *mixed) Kind() string { return "mixed" }
func (m *mixed) Description() string {
	return fmt.Sprintf("%d pod informers (cluster-wide) + status updates of seeded pods read from the informer cache; ops = UpdateStatus, lag = update sent → informer notified", m.informers)
}
func (m *mixed) Params() map[string]string {
	p := m.params()
	p["informers"] = itoa(m.informers)
	return p
}
func (m *mixed) Etcd() bool   { return false }
func (m *mixed) Seeded() bool { return true }

// seen is one informer's update notifications by resourceVersion.
type seen struct {
	mu sync.Mutex // guards at
	at map[string]time.Time
}

func (m *mixed) Run(ctx context.Context, env *Env) (*Outcome, error) {
	client := env.Target.Proto
	stop := make(chan struct{})
	factories := make([]informers.SharedInformerFactory, m.informers)
	seens := make([]*seen, m.informers)
	var listers []cache.Indexer
	t0 := time.Now()
	for i := range factories {
		factories[i] = informers.NewSharedInformerFactory(client, 0)
		inf := factories[i].Core().V1().Pods().Informer()
		s := &seen{at: map[string]time.Time{}}
		seens[i] = s
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) {
				if p, ok := obj.(*corev1.Pod); ok {
					now := time.Now()
					s.mu.Lock()
					s.at[p.ResourceVersion] = now
					s.mu.Unlock()
				}
			},
		}); err != nil {
			return nil, err
		}
		listers = append(listers, inf.GetIndexer())
		factories[i].Start(stop)
	}
	defer func() {
		close(stop)
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, f := range factories {
		for typ, ok := range f.WaitForCacheSync(syncCtx.Done()) {
			if !ok {
				return nil, fmt.Errorf("informer for %v did not sync", typ)
			}
		}
	}
	syncTook := time.Since(t0)

	var sentMu sync.Mutex // guards sent
	sent := map[string]time.Time{}
	rngs := workerRands(m.Concurrency, env.Run)
	per := max(env.Seed.Pods/m.Concurrency, 1)
	res, err := load.Run(ctx, m.options(), func(ctx context.Context, wk int, seq int64) error {
		// Workers own disjoint pods (i mod concurrency == wk), as
		// controllers own disjoint objects.
		i := min(wk+m.Concurrency*rngs[wk].IntN(per), env.Seed.Pods-1)
		ns, name := env.Seed.Pod(i)
		obj, ok, err := listers[0].GetByKey(ns + "/" + name)
		if err != nil || !ok {
			return errors.New("pod not in the informer cache")
		}
		p := obj.(*corev1.Pod).DeepCopy()
		setHeartbeat(p, fmt.Sprintf("%s-%d-%d", env.ID, wk, seq))
		t := time.Now()
		got, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		sentMu.Lock()
		sent[got.ResourceVersion] = t
		sentMu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Let the informers catch up with the last updates.
	want := len(sent)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for _, s := range seens {
			s.mu.Lock()
			n := 0
			for rv := range sent {
				if _, ok := s.at[rv]; ok {
					n++
				}
			}
			s.mu.Unlock()
			done = done && n >= want
		}
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lag stats.Histogram
	missed := 0
	for _, s := range seens {
		s.mu.Lock()
		for rv, t := range sent {
			if at, ok := s.at[rv]; ok {
				lag.Record(at.Sub(t))
			} else {
				missed++
			}
		}
		s.mu.Unlock()
	}
	return &Outcome{Result: res, Extra: map[string]float64{
		"informer_sync_s":        syncTook.Seconds(),
		"informer_lag_p50_ms":    ms(lag.Quantile(0.5)),
		"informer_lag_p99_ms":    ms(lag.Quantile(0.99)),
		"informer_lag_max_ms":    ms(lag.Max()),
		"informer_missed_events": float64(missed),
		"pods_in_cache":          float64(len(listers[0].ListKeys())),
	}}, nil
}

func setHeartbeat(p *corev1.Pod, msg string) {
	now := metav1.Now()
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == HeartbeatCondition {
			p.Status.Conditions[i].Message = msg
			p.Status.Conditions[i].LastProbeTime = now
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: HeartbeatCondition, Status: corev1.ConditionTrue, Message: msg, LastProbeTime: now, LastTransitionTime: now,
	})
}
