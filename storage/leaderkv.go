package storage

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// noLeaderRetries is how often a request a member refused for want of a
// leader is sent again; the client's balancer sends each attempt to the
// next member.
const noLeaderRetries = 4

// RequireLeader wraps kv so that every request requires the member that
// serves it to have a leader. A member cut off from the others then
// answers at once that it has none, instead of holding the request until
// its deadline; the request, never proposed, goes to the next member.
// (kube-apiserver's requests wait out such a member's keepalive.)
func RequireLeader(kv clientv3.KV) clientv3.KV { return leaderKV{kv} }

type leaderKV struct{ clientv3.KV }

// retry runs call until it succeeds, fails otherwise than for want of a
// leader, or has been tried noLeaderRetries times.
func retry[T any](ctx context.Context, call func() (T, error)) (T, error) {
	for i := 0; ; i++ {
		out, err := call()
		if err == nil || !errors.Is(err, rpctypes.ErrNoLeader) || i == noLeaderRetries-1 {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, err
		case <-time.After(time.Duration(i+1) * 50 * time.Millisecond):
		}
	}
}

func (k leaderKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	ctx = clientv3.WithRequireLeader(ctx)
	return retry(ctx, func() (*clientv3.PutResponse, error) { return k.KV.Put(ctx, key, val, opts...) })
}

func (k leaderKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx = clientv3.WithRequireLeader(ctx)
	return retry(ctx, func() (*clientv3.GetResponse, error) { return k.KV.Get(ctx, key, opts...) })
}

func (k leaderKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	ctx = clientv3.WithRequireLeader(ctx)
	return retry(ctx, func() (*clientv3.DeleteResponse, error) { return k.KV.Delete(ctx, key, opts...) })
}

func (k leaderKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	ctx = clientv3.WithRequireLeader(ctx)
	return retry(ctx, func() (*clientv3.CompactResponse, error) { return k.KV.Compact(ctx, rev, opts...) })
}

func (k leaderKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	ctx = clientv3.WithRequireLeader(ctx)
	return retry(ctx, func() (clientv3.OpResponse, error) { return k.KV.Do(ctx, op) })
}

func (k leaderKV) Txn(ctx context.Context) clientv3.Txn {
	ctx = clientv3.WithRequireLeader(ctx)
	return &leaderTxn{Txn: k.KV.Txn(ctx), ctx: ctx}
}

// leaderTxn commits again when the member had no leader: the request was
// refused before it was proposed, so it cannot have been applied.
type leaderTxn struct {
	clientv3.Txn
	ctx context.Context
}

func (t *leaderTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *leaderTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *leaderTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *leaderTxn) Commit() (*clientv3.TxnResponse, error) {
	return retry(t.ctx, t.Txn.Commit)
}
