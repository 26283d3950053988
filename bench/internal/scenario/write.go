package scenario

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/bench/internal/load"
	"github.com/kgate/kgate/bench/internal/objects"
	"github.com/kgate/kgate/bench/internal/seed"
)

// write creates, updates or patches pods.
type write struct {
	Common
	op string // create, update, patch
}

var writeOps = []string{"create", "update", "patch"}

func newWrites(c Common, a *args, _ Defaults) []Scenario {
	var out []Scenario
	for _, op := range a.choices("ops", writeOps, writeOps) {
		out = append(out, &write{Common: c, op: op})
	}
	return out
}

func (w *write) Name() string { return "write/" + w.op }
func (w *write) Kind() string { return "write" }
func (w *write) Description() string {
	switch w.op {
	case "create":
		return "CREATE new pods (deleted after the run)"
	case "update":
		return "UPDATE (PUT) a pod each worker owns, with its latest resourceVersion"
	}
	return "PATCH (strategic merge) an annotation of a random seeded pod"
}
func (w *write) Params() map[string]string { p := w.params(); p["op"] = w.op; return p }
func (w *write) Etcd() bool                { return false }
func (w *write) Seeded() bool              { return w.op == "patch" }

func (w *write) Run(ctx context.Context, env *Env) (*Outcome, error) {
	client := env.Target.Proto
	ns := env.Prefix + "-write"
	if err := seed.Namespaces(ctx, client, []string{ns}); err != nil {
		return nil, err
	}
	pods := client.CoreV1().Pods(ns)
	var op load.Op
	switch w.op {
	case "create":
		defer w.cleanup(env, ns)
		op = func(ctx context.Context, wk int, seq int64) error {
			name := fmt.Sprintf("c-%s-%d-%d", env.ID, wk, seq)
			_, err := pods.Create(ctx, objects.Pod(ns, name, "write", int(seq)), metav1.CreateOptions{})
			return err
		}
	case "update":
		own := make([]*corev1.Pod, w.Concurrency)
		for i := range own {
			name := fmt.Sprintf("u-%d", i)
			p, err := pods.Create(ctx, objects.Pod(ns, name, "write", i), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				p, err = pods.Get(ctx, name, metav1.GetOptions{})
			}
			if err != nil {
				return nil, fmt.Errorf("cannot prepare pod %s/%s: %w", ns, name, err)
			}
			own[i] = p
		}
		op = func(ctx context.Context, wk int, seq int64) error {
			p := own[wk].DeepCopy()
			p.Annotations["bench.kgate.io/seq"] = env.ID + "-" + strconv.FormatInt(seq, 10)
			got, err := pods.Update(ctx, p, metav1.UpdateOptions{})
			if err != nil {
				if apierrors.IsConflict(err) {
					if fresh, gerr := pods.Get(ctx, p.Name, metav1.GetOptions{}); gerr == nil {
						own[wk] = fresh
					}
				}
				return err
			}
			own[wk] = got
			return nil
		}
	case "patch":
		rngs := workerRands(w.Concurrency, env.Run)
		op = func(ctx context.Context, wk int, seq int64) error {
			pns, name := env.Seed.Pod(rngs[wk].IntN(env.Seed.Pods))
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.kgate.io/patched":"%s-%d-%d"}}}`, env.ID, wk, seq)
			_, err := client.CoreV1().Pods(pns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
	}
	res, err := load.Run(ctx, w.options(), op)
	return &Outcome{Result: res}, err
}

// cleanup deletes the pods a create run made, at once (no kubelet will
// confirm a graceful deletion).
func (w *write) cleanup(env *Env, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := env.Target.Proto.CoreV1().Pods(ns).DeleteCollection(ctx,
		metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: objects.LabelSet + "=write"})
	if err != nil {
		env.Log.Warn("cannot delete the pods of a create run", "namespace", ns, "err", err)
	}
}
