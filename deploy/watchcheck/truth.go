package watchcheck

import (
	"context"
	"fmt"
	"maps"
	"strconv"

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
