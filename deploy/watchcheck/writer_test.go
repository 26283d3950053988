package watchcheck

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writer changes ConfigMaps at random through the API, one write at a
// time, and records every acknowledged write in a History.
//
// Revisions: a create or update answers with the new object, whose
// resourceVersion is the write's revision. A delete answers, in kgate, with
// the last state carrying the delete's revision (kube-apiserver answers a
// Status for ConfigMaps); when the answer is a Status the revision is found
// in etcd's history instead (the first revision after the last write at
// which the key is gone). A write whose outcome is unknown (an error) is
// settled by reading the key from etcd. Verify then checks every recorded
// write, and the final state, against etcd: the expected watch streams are
// derived from a history etcd confirms, not from any watch.
type writer struct {
	c          *Truth
	cs         kubernetes.Interface
	hist       *History
	rng        *rand.Rand
	namespaces []string
	names      int
	model      map[string]*Object // current state by namespace/name
	seq        int
	failed     int // writes that returned an error
	errs       []string
	// unknown holds the keys of writes whose outcome was unknown (the
	// connection broke): found not made, they may still be made later.
	unknown map[string]bool
	// pause is held around each write: holding it pauses the writer.
	pause sync.Mutex
}

func newWriter(c *Truth, cs kubernetes.Interface, hist *History, seed uint64, namespaces []string, names int) *writer {
	return &writer{
		c: c, cs: cs, hist: hist, rng: rand.New(rand.NewPCG(seed, 1)),
		namespaces: namespaces, names: names, model: map[string]*Object{}, unknown: map[string]bool{},
	}
}

func (w *writer) labels() map[string]string {
	l := map[string]string{}
	if w.rng.IntN(100) < 85 {
		l["app"] = []string{"a", "b", "c"}[w.rng.IntN(3)]
	}
	if w.rng.IntN(2) == 0 {
		l["tier"] = []string{"x", "y"}[w.rng.IntN(2)]
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

// run writes until ctx ends, at most rate writes a second.
func (w *writer) run(ctx context.Context, rate int) error {
	every := time.Second / time.Duration(max(rate, 1))
	next := time.Now()
	for ctx.Err() == nil {
		w.pause.Lock()
		err := w.step(ctx)
		w.pause.Unlock()
		if err != nil && ctx.Err() == nil {
			return err
		}
		next = next.Add(every)
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		} else {
			next = time.Now()
		}
	}
	return nil
}

// step makes one random write. It is not cancelled with ctx: a write cut
// off in flight may still be made after any read that would settle it.
func (w *writer) step(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ns := w.namespaces[w.rng.IntN(len(w.namespaces))]
	name := fmt.Sprintf("cm-%02d", w.rng.IntN(w.names))
	if w.unknown[ns+"/"+name] {
		// A write cut off earlier may have been made since.
		if err := w.resettle(ctx, ns, name); err != nil {
			return err
		}
	}
	cur := w.model[ns+"/"+name]
	w.seq++
	if cur == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: w.labels()},
			Data:       map[string]string{"v": strconv.Itoa(w.seq)},
		}
		out, err := w.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		return w.record(ctx, Create, cur, out, ns, name, err)
	}
	r := w.rng.IntN(100)
	if r >= 80 {
		return w.delete(ctx, cur)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.FormatInt(cur.RV, 10), Labels: maps.Clone(cur.Labels)},
		Data:       map[string]string{"v": cur.Data},
	}
	if r < 30 || r >= 60 {
		cm.Labels = w.labels()
	}
	if r >= 30 {
		cm.Data["v"] = strconv.Itoa(w.seq)
	}
	out, err := w.cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	return w.record(ctx, Update, cur, out, ns, name, err)
}

func (w *writer) delete(ctx context.Context, cur *Object) error {
	rv := strconv.FormatInt(cur.RV, 10)
	res := w.cs.CoreV1().RESTClient().Delete().Namespace(cur.Namespace).Resource("configmaps").Name(cur.Name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}).Do(ctx)
	obj, err := res.Get()
	if err != nil {
		w.noteErr(err)
		return w.settle(ctx, cur.Namespace, cur.Name, err)
	}
	var rev int64
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		o, err := ObjectOf(cm)
		if err != nil {
			return err
		}
		rev = o.RV
	} else if rev, err = w.c.DeleteRevision(ctx, cur); err != nil {
		return err
	}
	return w.add(Write{Rev: rev, Op: Delete, Prev: cur})
}

// record adds an acknowledged create or update, or settles a failed one.
func (w *writer) record(ctx context.Context, op Op, prev *Object, out *corev1.ConfigMap, ns, name string, err error) error {
	if err != nil {
		w.noteErr(err)
		return w.settle(ctx, ns, name, err)
	}
	o, err := ObjectOf(out)
	if err != nil {
		return err
	}
	if prev != nil && o.RV == prev.RV {
		// An update that changes nothing writes nothing, as in
		// kube-apiserver: the answer is the stored object.
		if !SameObject(o, prev) {
			return fmt.Errorf("update of %s answered its old revision %d with other content: %+v, was %+v", o.Key(), o.RV, o, prev)
		}
		return nil
	}
	return w.add(Write{Rev: o.RV, Op: op, Prev: prev, Cur: o})
}

func (w *writer) add(wr Write) error {
	if err := w.hist.Insert(wr); err != nil {
		return err
	}
	if wr.Cur == nil {
		delete(w.model, wr.Prev.Key())
	} else {
		w.model[wr.Cur.Key()] = wr.Cur
	}
	return nil
}

func (w *writer) noteErr(err error) {
	if len(w.errs) < 5 {
		w.errs = append(w.errs, err.Error())
	}
}

// settle finds out from etcd whether a write that failed was made: the
// writer is the only one writing its keys. A write whose connection broke
// may be made after this read (the gateway still had it): its key is
// settled again before it is written next, and at the end.
func (w *writer) settle(ctx context.Context, ns, name string, err error) error {
	w.failed++
	if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
		w.unknown[ns+"/"+name] = true
	}
	return w.resettle(ctx, ns, name)
}

// resettle records the change etcd has of ns/name beyond the model, if
// any. A write the writer thought not made is found made at its revision,
// which may be older than writes recorded since: History.Insert puts it in
// its place.
func (w *writer) resettle(ctx context.Context, ns, name string) error {
	prev := w.model[ns+"/"+name]
	now, _, err := w.c.ConfigMap(ctx, ns, name, 0)
	if err != nil {
		return err
	}
	switch {
	case now == nil && prev == nil, now != nil && prev != nil && now.RV == prev.RV:
		return nil // not made
	case now == nil:
		rev, err := w.c.DeleteRevision(ctx, prev)
		if err != nil {
			return err
		}
		return w.add(Write{Rev: rev, Op: Delete, Prev: prev})
	case prev == nil:
		return w.add(Write{Rev: now.RV, Op: Create, Cur: now})
	}
	return w.add(Write{Rev: now.RV, Op: Update, Prev: prev, Cur: now})
}

// verify checks the history against etcd: each write is in etcd's history
// at its revision, and the final state is etcd's state of the namespaces.
func (w *writer) verify(ctx context.Context) error {
	for k := range w.unknown {
		ns, name, _ := strings.Cut(k, "/")
		if err := w.resettle(ctx, ns, name); err != nil {
			return err
		}
	}
	writes := w.hist.Writes()
	for i := range writes {
		wr := &writes[i]
		ns, name, _ := strings.Cut(wr.Key(), "/")
		at, _, err := w.c.ConfigMap(ctx, ns, name, wr.Rev)
		if err != nil {
			return err
		}
		switch {
		case wr.Cur != nil && (at == nil || !SameObject(at, wr.Cur)):
			return fmt.Errorf("write %s %s at %d: etcd has %v there", wr.Op, wr.Key(), wr.Rev, at)
		case wr.Cur == nil && at != nil:
			return fmt.Errorf("delete of %s at %d: etcd still has %v there", wr.Key(), wr.Rev, at)
		case wr.Cur == nil:
			before, _, err := w.c.ConfigMap(ctx, ns, name, wr.Rev-1)
			if err != nil {
				return err
			}
			if before == nil || !SameObject(before, wr.Prev) {
				return fmt.Errorf("delete of %s at %d: etcd had %v before, want %v", wr.Key(), wr.Rev, before, wr.Prev)
			}
		}
	}
	want := StateAt(writes, 1<<62)
	for _, ns := range w.namespaces {
		got, _, err := w.c.ConfigMaps(ctx, ns, 0)
		if err != nil {
			return err
		}
		for k, o := range got {
			if m := want[k]; m == nil || !SameObject(m, o) {
				return fmt.Errorf("etcd has %s %+v, the history %+v", k, o, m)
			}
		}
		for k, o := range want {
			if o.Namespace == ns && got[k] == nil {
				return fmt.Errorf("the history has %s, etcd does not", k)
			}
		}
	}
	return nil
}
