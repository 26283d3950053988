package chaos

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"strconv"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/deploy/watchcheck"
)

// truthTimeout bounds the writer's reads of etcd after a request.
const truthTimeout = 2 * time.Minute

// writer creates, updates and deletes its own ConfigMaps one at a time,
// each request through the next gateway, with a resourceVersion
// precondition from what it knows is stored. A write whose answer was
// lost is settled from etcd; a 409 after which etcd shows no change was
// no conflict.
type writer struct {
	id    int
	gws   *gateways
	truth *watchcheck.Truth
	rec   *recorder
	rng   *rand.Rand
	keys  int
	pause time.Duration
	// limit, when set, paces the writes (the soak's rate).
	limit *rate.Limiter
	// shards, when not 0, labels each ConfigMap shard=<n> by its name,
	// for watchers that select one shard.
	shards int
	// model is what the writer knows is stored, by name.
	model map[string]*watchcheck.Object
	// unsettled holds, by name, when the earliest failed write began that
	// etcd has not yet shown the effect of (it may still take effect).
	unsettled map[string]time.Time
	seq       int
	next      int // the gateway of the next request
}

func (w *writer) run(ctx context.Context) {
	for ctx.Err() == nil {
		if w.limit != nil && w.limit.Wait(ctx) != nil {
			return
		}
		w.step(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(w.pause):
		}
	}
}

func (w *writer) labels(name string) map[string]string {
	var ls map[string]string
	switch w.rng.IntN(3) {
	case 0:
		ls = map[string]string{"app": "a"}
	case 1:
		ls = map[string]string{"app": "b"}
	}
	if w.shards > 0 {
		if ls == nil {
			ls = map[string]string{}
		}
		ls["shard"] = shardOf(name, w.shards)
	}
	return ls
}

// shardOf is name's shard among n: stable, so that every write of one
// ConfigMap is an event for the watchers of one shard.
func shardOf(name string, n int) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return strconv.Itoa(int(h.Sum32() % uint32(n)))
}

// step makes one write. It is not cancelled with ctx: no write is left
// with an outcome the writer does not know.
func (w *writer) step(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*requestTimeout)
	defer cancel()
	name := fmt.Sprintf("w%d-%d", w.id, w.rng.IntN(w.keys))
	cur := w.model[name]
	w.seq++
	data := fmt.Sprintf("w%d-%d", w.id, w.seq)
	start := time.Now()
	var (
		out  *corev1.ConfigMap
		kind string
		call func(kubernetes.Interface) error
	)
	switch {
	case cur == nil:
		kind = "create"
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: w.labels(name)}, Data: map[string]string{"v": data}}
		call = func(cs kubernetes.Interface) (err error) {
			out, err = cs.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
	case w.rng.IntN(4) == 0:
		kind = "delete"
		rv := strconv.FormatInt(cur.RV, 10)
		call = func(cs kubernetes.Interface) error {
			obj, err := cs.CoreV1().RESTClient().Delete().Namespace(Namespace).Resource("configmaps").Name(name).
				Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}).Do(ctx).Get()
			if cm, ok := obj.(*corev1.ConfigMap); ok && err == nil {
				out = cm
			}
			return err
		}
	default:
		kind = "update"
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, ResourceVersion: strconv.FormatInt(cur.RV, 10), Labels: maps.Clone(cur.Labels)},
			Data:       map[string]string{"v": data},
		}
		if w.rng.IntN(2) == 0 {
			cm.Labels = w.labels(name)
		}
		call = func(cs kubernetes.Interface) (err error) {
			out, err = cs.CoreV1().ConfigMaps(Namespace).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}
	}
	gw, err := w.gws.do(w.next, call)
	w.next = (w.next + 1) % w.gws.n()
	w.rec.request(kind, gw, start, err)
	// Reading etcd after the request has its own time: etcd itself may
	// be the fault, and the request may have used all of its own.
	ctx, cancelTruth := context.WithTimeout(context.WithoutCancel(ctx), truthTimeout)
	defer cancelTruth()
	if err != nil {
		// Until etcd shows what became of it, this write may still take
		// effect: a change etcd shows later may be its doing, so the
		// linearizability history gives that change the earliest
		// unsettled call.
		if _, ok := w.unsettled[name]; !ok {
			w.unsettled[name] = start
		}
		w.settle(ctx, name, apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err), fmt.Errorf("%s %s through gateway %d: %w", kind, name, gw, err))
		return
	}
	// A write that succeeded with a precondition rules out every earlier
	// one taking effect later.
	delete(w.unsettled, name)
	now := time.Now()
	if kind == "delete" {
		rev, err := w.deletedAt(ctx, name, out)
		if err != nil {
			// The delete is acknowledged: the model and the
			// linearizability history have it even without its revision.
			w.rec.problem("writer %d: cannot find the revision of the delete of %s: %v", w.id, name, err)
			delete(w.model, name)
			w.rec.kvOp(KVOp{Key: name, Write: true, Call: start, Return: now, Client: w.id})
			return
		}
		delete(w.model, name)
		w.rec.ack(ack{At: now, Rev: rev, Op: watchcheck.Delete, Key: Namespace + "/" + name})
		w.rec.kvOp(KVOp{Key: name, Write: true, RV: 0, Rev: rev, Call: start, Return: now, Client: w.id})
		return
	}
	o, err := watchcheck.ObjectOf(out)
	if err != nil {
		w.rec.problem("writer %d: %v", w.id, err)
		return
	}
	w.model[name] = o
	op := watchcheck.Update
	if kind == "create" {
		op = watchcheck.Create
	}
	w.rec.ack(ack{At: now, Rev: o.RV, Op: op, Key: o.Key(), Data: data})
	w.rec.kvOp(KVOp{Key: name, Write: true, RV: o.RV, Rev: o.RV, Call: start, Return: now, Client: w.id})
}

// deletedAt is the revision of an acknowledged delete: the object's
// resourceVersion in the answer when it carries one, else found in etcd.
func (w *writer) deletedAt(ctx context.Context, name string, out *corev1.ConfigMap) (int64, error) {
	if out != nil && out.ResourceVersion != "" && out.ResourceVersion != strconv.FormatInt(w.model[name].RV, 10) {
		return strconv.ParseInt(out.ResourceVersion, 10, 64)
	}
	return w.truth.DeleteRevision(ctx, w.model[name])
}

// settle finds what etcd has of name after a failed write and takes it as
// the writer's model. A write etcd applied is a write whose answer was
// lost: it enters the linearizability history as returning now. A
// conflict (409) after which etcd still has what the writer knew was no
// conflict at all.
func (w *writer) settle(ctx context.Context, name string, conflict bool, cause error) {
	start := w.unsettled[name]
	prev := w.model[name]
	var now *watchcheck.Object
	for {
		var err error
		if now, _, err = w.truth.ConfigMap(ctx, Namespace, name, 0); err == nil {
			break
		}
		if ctx.Err() != nil {
			w.rec.problem("writer %d: cannot settle %s after %v: %v", w.id, name, cause, err)
			return
		}
		time.Sleep(time.Second) // etcd itself may be the fault
	}
	returned := time.Now()
	switch {
	case now == nil && prev == nil, now != nil && prev != nil && now.RV == prev.RV:
		if conflict {
			w.rec.falseConflict("writer %d: %v, but etcd still has what the writer knew (%v)", w.id, cause, prev)
		}
		return
	case now == nil:
		delete(w.unsettled, name)
		rev, err := w.truth.DeleteRevision(ctx, prev)
		if err != nil {
			w.rec.problem("writer %d: cannot settle %s after %v: %v", w.id, name, cause, err)
		}
		delete(w.model, name)
		w.rec.kvOp(KVOp{Key: name, Write: true, RV: 0, Rev: rev, Call: start, Return: returned, Client: w.id})
	default:
		delete(w.unsettled, name)
		w.model[name] = now
		w.rec.kvOp(KVOp{Key: name, Write: true, RV: now.RV, Rev: now.RV, Call: start, Return: returned, Client: w.id})
	}
}
