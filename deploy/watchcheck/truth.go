package watchcheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
)

// Truth reads ConfigMaps straight from etcd: what the checks hold the API
// against.
type Truth struct {
	Etcd  *clientv3.Client
	Codec *codec.Codec
	// Resource is the registry's configmaps resource.
	Resource *registry.Resource
}

// ObjectOf is what the checks compare of cm.
func ObjectOf(cm *corev1.ConfigMap) (*Object, error) {
	rv, err := strconv.ParseInt(cm.ResourceVersion, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad resourceVersion %q of %s/%s: %w", cm.ResourceVersion, cm.Namespace, cm.Name, err)
	}
	var ls map[string]string
	if len(cm.Labels) > 0 {
		ls = maps.Clone(cm.Labels)
	}
	return &Object{Namespace: cm.Namespace, Name: cm.Name, Labels: ls, Data: cm.Data["v"], RV: rv}, nil
}

// ConfigMaps reads the ConfigMaps of namespace ns ("" for all) from etcd
// at revision rev (0: the current one), by namespace/name, and returns
// the revision read.
func (c *Truth) ConfigMaps(ctx context.Context, ns string, rev int64) (map[string]*Object, int64, error) {
	prefix := c.Resource.ListPrefix(ns)
	end := clientv3.GetPrefixRangeEnd(prefix)
	out := map[string]*Object{}
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(1000)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.Etcd.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("cannot read %s at %d from etcd: %w", prefix, rev, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			o, err := c.decode(kv.Value, kv.ModRevision)
			if err != nil {
				return nil, 0, fmt.Errorf("cannot decode %s: %w", kv.Key, err)
			}
			out[o.Key()] = o
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func (c *Truth) decode(value []byte, rev int64) (*Object, error) {
	var cm corev1.ConfigMap
	if err := c.Codec.Decode(value, &cm); err != nil {
		return nil, err
	}
	cm.ResourceVersion = strconv.FormatInt(rev, 10)
	return ObjectOf(&cm)
}

// ConfigMap reads one ConfigMap from etcd at rev (0: now); nil when it
// does not exist there.
func (c *Truth) ConfigMap(ctx context.Context, ns, name string, rev int64) (*Object, int64, error) {
	var opts []clientv3.OpOption
	if rev != 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := c.Etcd.Get(ctx, c.Resource.Key(ns, name), opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s/%s at %d from etcd: %w", ns, name, rev, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, nil
	}
	o, err := c.decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	return o, resp.Header.Revision, err
}

// WaitFor returns once the ConfigMap ns/name is in etcd, watching its key
// from the revision it was found missing at.
func (c *Truth) WaitFor(ctx context.Context, ns, name string) error {
	key := c.Resource.Key(ns, name)
	resp, err := c.Etcd.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("cannot read %s from etcd: %w", key, err)
	}
	if resp.Count > 0 {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range c.Etcd.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("cannot watch %s: %w", key, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot wait for %s: %w", key, err)
	}
	return fmt.Errorf("cannot wait for %s: the watch ended", key)
}

// Record watches etcd's ConfigMaps of namespace ns from revision from+1
// until ctx ends and adds every change to h, in etcd's order, as the
// write that made it: etcd's own history, whatever the clients were told.
// A watch that ends (its member lost the leader, or went away) is made
// again from the revision after the last change recorded, on whichever
// member answers; a compaction that removed part of the history, or a
// change that cannot be decoded, ends it with an error.
func (c *Truth) Record(ctx context.Context, ns string, from int64, h *History) error {
	prefix := c.Resource.ListPrefix(ns)
	next := from + 1
	for ctx.Err() == nil {
		err := c.record(ctx, prefix, &next, h)
		if errors.Is(err, rpctypes.ErrCompacted) || errors.Is(err, errUndecodable) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

var errUndecodable = errors.New("undecodable change")

// record watches from *next, moving it past every change recorded, until
// the watch ends.
func (c *Truth) record(ctx context.Context, prefix string, next *int64, h *History) error {
	// WithRequireLeader: a member cut off from the others ends the watch
	// instead of going silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.Etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(*next), clientv3.WithPrevKV()) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("cannot watch %s from %d: %w", prefix, *next, err)
		}
		for _, ev := range wr.Events {
			var prev, cur *Object
			var err error
			if ev.PrevKv != nil {
				if prev, err = c.decode(ev.PrevKv.Value, ev.PrevKv.ModRevision); err != nil {
					return fmt.Errorf("%w: %s: %w", errUndecodable, ev.Kv.Key, err)
				}
			}
			op := Delete
			if ev.Type == clientv3.EventTypePut {
				if cur, err = c.decode(ev.Kv.Value, ev.Kv.ModRevision); err != nil {
					return fmt.Errorf("%w: %s: %w", errUndecodable, ev.Kv.Key, err)
				}
				op = Update
				if ev.IsCreate() {
					op = Create
				}
			}
			if err := h.Add(Write{Rev: ev.Kv.ModRevision, Op: op, Prev: prev, Cur: cur}); err != nil {
				return fmt.Errorf("%w: %w", errUndecodable, err)
			}
			*next = ev.Kv.ModRevision + 1
		}
	}
	return fmt.Errorf("cannot watch %s: the watch ended", prefix)
}

// DeleteRevision finds the revision that deleted prev's key: the first
// after prev's at which etcd no longer has it (a binary search over
// etcd's history).
func (c *Truth) DeleteRevision(ctx context.Context, prev *Object) (int64, error) {
	_, hi, err := c.ConfigMap(ctx, prev.Namespace, prev.Name, 0)
	if err != nil {
		return 0, err
	}
	lo := prev.RV + 1 // the answer lies in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		o, _, err := c.ConfigMap(ctx, prev.Namespace, prev.Name, mid)
		if err != nil {
			return 0, err
		}
		if o == nil {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
