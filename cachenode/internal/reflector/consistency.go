package reflector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/cachenode/internal/store"
)

// checkConsistency compares, every ConsistencyInterval, the digest of
// the range's keys and mod revisions in the store with etcd's at the same
// revision, as kube-apiserver's cache consistency checker does. A
// difference (a bug, or an event lost on the way) is counted, logged and
// repaired: the watch loop relists the range.
func (r *Reflector) checkConsistency(ctx context.Context) {
	for {
		wait := r.cfg.ConsistencyInterval
		wait += rand.N(wait/10 + 1)
		if !sleep(ctx, wait) {
			return
		}
		ok, err := r.Consistent(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.log.Debug("cannot check the range against etcd", "err", err)
		case !ok:
			select {
			case r.relist <- struct{}{}:
			default:
			}
		}
	}
}

// Inconsistent reports whether the last check found a difference that the
// next list has not repaired yet.
func (r *Reflector) Inconsistent() bool { return r.inconsistent.Load() }

// errNotChecked: the check could not be made (not listed yet, or the
// revision was compacted meanwhile); try again later.
var errNotChecked = errors.New("reflector: consistency not checked")

// Consistent compares the store's keys and mod revisions with etcd's at
// the store's revision; false (counted and logged) when they differ.
func (r *Reflector) Consistent(ctx context.Context) (bool, error) {
	st := r.state.Load()
	if st == nil {
		return false, errNotChecked
	}
	snap := st.store.Snapshot()
	want, err := r.etcdDigest(ctx, snap.Revision, st.skipped)
	if err != nil {
		return false, err
	}
	got := snap.Digest()
	r.m.consistencyChecks.Inc()
	if got == want {
		return true, nil
	}
	r.m.inconsistencies.Inc()
	r.inconsistent.Store(true)
	r.log.Error("the range's cache differs from etcd: relisting", "revision", snap.Revision,
		"cachedObjects", got.Count, "etcdObjects", want.Count, "cachedDigest", got.Sum, "etcdDigest", want.Sum)
	return false, nil
}

// etcdDigest digests the range in etcd at rev, keys only, page by page,
// leaving out the keys the list skipped at the revision it saw them.
func (r *Reflector) etcdDigest(ctx context.Context, rev int64, skipped map[string]int64) (store.Digest, error) {
	var d store.Digest
	from := r.rng.Start
	for {
		resp, err := r.cfg.Etcd.Get(ctx, from, clientv3.WithRange(r.rng.End), clientv3.WithRev(rev),
			clientv3.WithKeysOnly(), clientv3.WithLimit(r.cfg.PageSize))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return d, fmt.Errorf("%w: %w", errNotChecked, err)
		}
		if err != nil {
			return d, fmt.Errorf("cannot read range %s at %d: %w", r.rng.ID, rev, err)
		}
		for _, kv := range resp.Kvs {
			if at, ok := skipped[string(kv.Key)]; ok && at == kv.ModRevision {
				continue
			}
			d.Add(string(kv.Key), kv.ModRevision)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return d, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
