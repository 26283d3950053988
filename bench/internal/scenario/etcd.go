package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kgate/kgate/bench/internal/load"
	"github.com/kgate/kgate/bench/internal/objects"
)

// etcdOp drives etcd directly with the writes and reads an API server
// turns requests into: the physical limit under any server.
type etcdOp struct {
	Common
	op           string // txn-create, txn-update, get, range-ns, range-all
	serializable bool
}

var etcdOps = []string{"txn-create", "txn-update", "get", "range-ns", "range-all"}

// EtcdKeyPrefix is where etcd scenarios write (outside /registry).
const EtcdKeyPrefix = "/kgate-bench/"

func newEtcd(c Common, a *args) []Scenario {
	ser := a.str("consistency", "linearizable") == "serializable"
	var out []Scenario
	for _, op := range a.choices("ops", []string{"txn-create", "txn-update", "get", "range-ns"}, etcdOps) {
		out = append(out, &etcdOp{Common: c, op: op, serializable: ser})
	}
	return out
}

func (e *etcdOp) Name() string { return "etcd/" + e.op }
func (e *etcdOp) Kind() string { return "etcd" }
func (e *etcdOp) Description() string {
	read := "linearizable"
	if e.serializable {
		read = "serializable"
	}
	switch e.op {
	case "txn-create":
		return "etcd txn: if create_revision(key)==0 then put a pod's JSON (what a create does)"
	case "txn-update":
		return "etcd txn: if mod_revision(key)==rev then put (what an update does)"
	case "get":
		return "etcd " + read + " get of a seeded pod's key (kube-apiserver layout)"
	case "range-ns":
		return "etcd " + read + " range over one seeded namespace's pods"
	}
	return "etcd " + read + " range over every pod (/registry/pods/)"
}
func (e *etcdOp) Params() map[string]string {
	p := e.params()
	p["op"] = e.op
	if e.serializable {
		p["consistency"] = "serializable"
	}
	return p
}
func (e *etcdOp) Etcd() bool   { return true }
func (e *etcdOp) Seeded() bool { return e.op == "get" || e.op == "range-ns" || e.op == "range-all" }

func (e *etcdOp) Run(ctx context.Context, env *Env) (*Outcome, error) {
	if env.Etcd == nil {
		return nil, errors.New("no etcd endpoints")
	}
	kv := env.Etcd
	var readOpts []clientv3.OpOption
	if e.serializable {
		readOpts = append(readOpts, clientv3.WithSerializable())
	}
	p := objects.Pod("kgate-bench-etcd", "pod", "etcd", 1)
	objects.SetRunningStatus(p, 1)
	value, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	val := string(value)
	base := EtcdKeyPrefix + env.ID + "/"
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kv.Delete(cctx, base, clientv3.WithPrefix()); err != nil {
			env.Log.Warn("cannot delete etcd scenario keys", "prefix", base, "err", err)
		}
	}()
	var items atomic.Int64
	var op load.Op
	switch e.op {
	case "txn-create":
		op = func(ctx context.Context, wk int, seq int64) error {
			key := fmt.Sprintf("%sc/%d/%d", base, wk, seq)
			r, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, val)).Commit()
			if err == nil && !r.Succeeded {
				err = errors.New("etcd: key exists")
			}
			return err
		}
	case "txn-update":
		revs := make([]int64, e.Concurrency)
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for wk := range revs {
			r, err := kv.Put(pctx, fmt.Sprintf("%su/%d", base, wk), val)
			if err != nil {
				return nil, fmt.Errorf("cannot prepare etcd keys: %w", err)
			}
			revs[wk] = r.Header.Revision
		}
		op = func(ctx context.Context, wk int, seq int64) error {
			key := fmt.Sprintf("%su/%d", base, wk)
			r, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", revs[wk])).Then(clientv3.OpPut(key, val)).Commit()
			if err != nil {
				return err
			}
			if !r.Succeeded {
				return errors.New("etcd: revision changed")
			}
			revs[wk] = r.Header.Revision
			return nil
		}
	case "get", "range-ns", "range-all":
		rngs := workerRands(e.Concurrency, env.Run)
		op = func(ctx context.Context, wk int, seq int64) error {
			var key string
			opts := readOpts
			switch e.op {
			case "get":
				ns, name := env.Seed.Pod(rngs[wk].IntN(env.Seed.Pods))
				key = "/registry/pods/" + ns + "/" + name
			case "range-ns":
				key = "/registry/pods/" + env.Seed.Namespace(rngs[wk].IntN(env.Seed.Namespaces)) + "/"
				opts = append(opts[:len(opts):len(opts)], clientv3.WithPrefix())
			default:
				key = "/registry/pods/"
				opts = append(opts[:len(opts):len(opts)], clientv3.WithPrefix())
			}
			r, err := kv.Get(ctx, key, opts...)
			if err == nil {
				items.Add(int64(len(r.Kvs)))
			}
			return err
		}
	}
	res, err := load.Run(ctx, e.options(), op)
	out := &Outcome{Result: res, Extra: map[string]float64{}}
	if n := res.Latency.Count(); n > 0 && e.Seeded() {
		out.Extra["items_per_read"] = float64(items.Load()) / float64(n)
	}
	if e.op == "txn-create" || e.op == "txn-update" {
		out.Extra["value_bytes"] = float64(len(value))
	}
	return out, err
}
