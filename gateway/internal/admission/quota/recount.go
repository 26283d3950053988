package quota

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Recounter recomputes the quotas' status.used from the objects in etcd,
// as kube-controller-manager's resourcequota controller resyncs: usage
// the admission bookkeeping missed (objects written around kgate, a
// gateway that died between charging and writing) is corrected.
//
// A write in flight is charged before its object exists, so a recount at
// that moment sees less than is used. A value is therefore raised at
// once (objects exist that were not charged) but lowered only when two
// rounds in a row found it too high by the same amount or more: a write
// in flight lasts milliseconds, a round's interval far longer. Each
// change is a compare-and-swap on the quota, as every charge is.
type Recounter struct {
	p Plugin
	// high are the values found too high in the last round, by quota
	// (namespace/name) and resource: what used exceeded the count by.
	high map[string]corev1.ResourceList
}

// NewRecounter returns a recounter for p's quotas; it is used by one
// goroutine.
func NewRecounter(p Plugin) *Recounter {
	return &Recounter{p: p, high: map[string]corev1.ResourceList{}}
}

// Round recounts every quota the lister knows and stores what changed.
// It returns how many quotas it updated.
func (r *Recounter) Round(ctx context.Context) (int, error) {
	seen := map[string]bool{}
	updated := 0
	var errs []error
	for _, o := range r.p.List.List("") {
		q, ok := o.(*corev1.ResourceQuota)
		if !ok {
			continue
		}
		key := q.Namespace + "/" + q.Name
		seen[key] = true
		changed, err := r.recount(ctx, key, q.Namespace, q.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot recount quota %s: %w", key, err))
			continue
		}
		if changed {
			updated++
		}
	}
	for key := range r.high {
		if !seen[key] {
			delete(r.high, key)
		}
	}
	return updated, errors.Join(errs...)
}

// recount counts one quota's resources and stores the corrections.
func (r *Recounter) recount(ctx context.Context, key, ns, name string) (bool, error) {
	cur, err := r.p.Quotas.Get(ctx, ns, name)
	if err != nil {
		return false, err
	}
	counted := corev1.ResourceList{}
	for n := range cur.Spec.Hard {
		c, err := r.p.count(ctx, ns, n)
		if err != nil {
			return false, err
		}
		counted[n] = c
	}
	lastHigh := r.high[key]
	high := corev1.ResourceList{}
	set := corev1.ResourceList{} // the values to store
	for n, c := range counted {
		used, ok := cur.Status.Used[n]
		switch cmp := used.Cmp(c); {
		case !ok || cmp < 0:
			set[n] = c
		case cmp > 0:
			over := used.DeepCopy()
			over.Sub(c)
			high[n] = over
			if prev, ok := lastHigh[n]; ok && prev.Cmp(over) >= 0 {
				set[n] = c
			}
		}
	}
	r.high[key] = high
	if len(set) == 0 {
		return false, nil
	}
	err = r.p.Quotas.Update(ctx, ns, name, func(q *corev1.ResourceQuota) error {
		if q.Status.Used == nil {
			q.Status.Used = corev1.ResourceList{}
		}
		for n, v := range set {
			// A charge or refund since the count: the count may not
			// include its object; the next round counts again.
			before, had := cur.Status.Used[n]
			now, has := q.Status.Used[n]
			if had != has || (had && before.Cmp(now) != 0) {
				return errMoved
			}
			if _, ok := q.Spec.Hard[n]; ok {
				q.Status.Used[n] = v
			}
		}
		return nil
	})
	if errors.Is(err, errMoved) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for n := range set {
		delete(high, n)
	}
	return true, nil
}

// errMoved aborts storing a recount: the quota changed since it was
// read.
var errMoved = errors.New("quota: changed while recounting")
