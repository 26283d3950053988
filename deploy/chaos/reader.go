package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/deploy/watchcheck"
)

// reader reads the writers' ConfigMaps through each gateway in turn:
// consistent GETs (for porcupine), consistent LISTs (exact snapshots) and
// resourceVersion=0 LISTs, which must never go back in time through one
// gateway.
type reader struct {
	id    int
	gws   *gateways
	rec   *recorder
	rng   *rand.Rand
	names []string // the writers' ConfigMap names
	pause time.Duration
	rv0   map[int]int64 // by gateway: the newest resourceVersion=0 LIST seen
	next  int
}

func (r *reader) run(ctx context.Context) {
	r.rv0 = map[int]int64{}
	for ctx.Err() == nil {
		r.step(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(r.pause):
		}
	}
}

func (r *reader) step(ctx context.Context) {
	first := r.next
	r.next = (r.next + 1) % r.gws.n()
	start := time.Now()
	switch k := r.rng.IntN(4); {
	case k < 2:
		name := r.names[r.rng.IntN(len(r.names))]
		var cm *corev1.ConfigMap
		gw, err := r.gws.do(first, func(cs kubernetes.Interface) (err error) {
			cm, err = cs.CoreV1().ConfigMaps(Namespace).Get(ctx, name, metav1.GetOptions{})
			return err
		})
		var rv int64
		switch {
		case apierrors.IsNotFound(err):
			err = nil
		case err == nil:
			o, perr := watchcheck.ObjectOf(cm)
			if perr != nil {
				r.rec.problem("reader %d: %v", r.id, perr)
				return
			}
			rv = o.RV
		}
		if ctx.Err() != nil {
			return
		}
		r.rec.request("get", gw, start, err)
		if err == nil {
			r.rec.kvOp(KVOp{Key: name, RV: rv, Call: start, Return: time.Now(), Client: 100 + r.id})
		}
	case k == 2:
		acked := r.rec.ackedRev()
		var l *corev1.ConfigMapList
		gw, err := r.gws.do(first, func(cs kubernetes.Interface) (err error) {
			l, err = cs.CoreV1().ConfigMaps(Namespace).List(ctx, metav1.ListOptions{})
			return err
		})
		if ctx.Err() != nil {
			return
		}
		r.rec.request("list", gw, start, err)
		if err != nil {
			return
		}
		rev, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
		if err != nil {
			r.rec.problem("reader %d: consistent LIST through gateway %d: resourceVersion %q", r.id, gw, l.ResourceVersion)
			return
		}
		objs := map[string]*watchcheck.Object{}
		for i := range l.Items {
			o, err := watchcheck.ObjectOf(&l.Items[i])
			if err != nil {
				r.rec.problem("reader %d: %v", r.id, err)
				return
			}
			objs[o.Key()] = o
		}
		r.rec.list(listRead{At: start, Rev: rev, AckedBefore: acked, Objects: objs})
	default:
		var l *corev1.ConfigMapList
		gw, err := r.gws.do(first, func(cs kubernetes.Interface) (err error) {
			l, err = cs.CoreV1().ConfigMaps(Namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			return err
		})
		if ctx.Err() != nil {
			return
		}
		r.rec.request("list-rv0", gw, start, err)
		if err != nil {
			return
		}
		rev, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
		if err != nil {
			r.rec.problem("reader %d: resourceVersion=0 LIST through gateway %d: resourceVersion %q", r.id, gw, l.ResourceVersion)
			return
		}
		if last := r.rv0[gw]; rev < last {
			r.rec.staleRead("reader %d: resourceVersion=0 LIST through gateway %d at revision %d, after one at %d", r.id, gw, rev, last)
		}
		r.rv0[gw] = max(r.rv0[gw], rev)
	}
}

// names lists the ConfigMap names of writers writers of keys keys each.
func names(writers, keys int) []string {
	var out []string
	for w := range writers {
		for k := range keys {
			out = append(out, fmt.Sprintf("w%d-%d", w, k))
		}
	}
	return out
}
