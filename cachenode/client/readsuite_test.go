package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

// windowEvents is the cache node's event window in this test: small, so that
// Expire can push a revision out of it with a few writes.
const windowEvents = 16

// TestReadSuite runs the shared read semantics against a real cache node
// through this client.
func TestReadSuite(t *testing.T) {
	env := cachenodetest.Start(t, func(c *cachenode.Config) { c.Window.MaxEvents = windowEvents })
	store, err := storage.New(storage.Config{Client: env.Etcd, Registry: env.Registry, Codec: env.Codec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := env.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if !ok {
		t.Fatal("configmaps not registered")
	}
	storagetest.RunReadSuite(t, &cacheTarget{env: env, store: store, res: res}, storagetest.ReadSuiteOptions{Cached: true, Selectors: true})
}

// cacheTarget reads ConfigMaps from a cache node, writes them to etcd.
type cacheTarget struct {
	env   *cachenodetest.Env
	store *storage.Store
	res   *registry.Resource
}

func (c *cacheTarget) rangeOf(key string) (string, error) {
	rng, ok := c.env.Ranges.Lookup(key)
	if !ok {
		return "", fmt.Errorf("no range holds %q", key)
	}
	return rng.ID, nil
}

func (c *cacheTarget) decode(data []byte) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	if err := c.env.Codec.Decode(data, &cm); err != nil {
		return nil, err
	}
	return &cm, nil
}

func (c *cacheTarget) Get(ctx context.Context, ns, name string, r storagetest.Read) (*corev1.ConfigMap, error) {
	key := c.res.Key(ns, name)
	id, err := c.rangeOf(key)
	if err != nil {
		return nil, err
	}
	obj, err := c.env.Client.Get(ctx, id, key, client.Read{ResourceVersion: r.ResourceVersion, Match: r.Match}, client.JSON)
	if err != nil {
		return nil, err
	}
	return c.decode(obj.Data)
}

func (c *cacheTarget) List(ctx context.Context, ns string, o storagetest.ListOptions) (*storagetest.ListResult, error) {
	prefix := c.res.ListPrefix(ns)
	id, err := c.rangeOf(prefix)
	if err != nil {
		return nil, err
	}
	l, err := c.env.Client.List(ctx, id, client.ListOptions{
		Read: client.Read{ResourceVersion: o.ResourceVersion, Match: o.Match}, Prefix: prefix,
		Label: o.Label, Field: o.Field, Limit: o.Limit, Continue: o.After,
	})
	if err != nil {
		return nil, err
	}
	out := &storagetest.ListResult{Revision: l.Revision, Last: l.Continue, Remaining: l.Remaining}
	for _, it := range l.Items {
		cm, err := c.decode(it)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, cm)
	}
	return out, nil
}

func (c *cacheTarget) Put(ctx context.Context, cm *corev1.ConfigMap) (int64, error) {
	return storagetest.PutConfigMap(ctx, c.store, c.res, cm)
}

// Expire writes more ConfigMaps than the window holds, in a namespace of
// their own, and waits for the node to see them: rev falls out of the
// window.
func (c *cacheTarget) Expire(ctx context.Context, rev int64) error {
	var last int64
	for i := range windowEvents + 1 {
		var err error
		last, err = c.Put(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "filler", Name: fmt.Sprint("f", i)}})
		if err != nil {
			return err
		}
	}
	_, err := c.Get(ctx, "filler", "f0", storagetest.Read{ResourceVersion: last, Match: storagetest.NotOlderThan})
	return err
}
