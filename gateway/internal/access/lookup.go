package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/satoken"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// objectLookup finds service accounts and the objects tokens are bound to
// for token verification: from the cache nodes, read as they are now;
// something not found is read again consistently, so a token issued for
// an object just created works at once.
type objectLookup struct {
	reg       *registry.Registry
	ranges    ranges.Source
	cache     Cache
	revisions feed.Revisions
}

func (l objectLookup) Object(ctx context.Context, resource, namespace, name string) (satoken.Object, error) {
	data, err := l.raw(ctx, corev1.SchemeGroupVersion.WithResource(resource), namespace, name, false)
	if err != nil {
		return satoken.Object{}, err
	}
	var m struct {
		Metadata struct {
			UID               string       `json:"uid"`
			DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return satoken.Object{}, fmt.Errorf("cannot decode %s %s/%s: %w", resource, namespace, name, err)
	}
	out := satoken.Object{UID: m.Metadata.UID}
	if m.Metadata.DeletionTimestamp != nil {
		t := m.Metadata.DeletionTimestamp.Time
		out.DeletionTimestamp = &t
	}
	return out, nil
}

// raw reads the object's JSON; a missing one is an error wrapping
// satoken.ErrNotFound. consistent reads it at etcd's current revision or
// later; otherwise as the cache has it, and again consistently only when
// not found there.
func (l objectLookup) raw(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, consistent bool) ([]byte, error) {
	res, ok := l.reg.Lookup(gvr)
	if !ok {
		return nil, fmt.Errorf("cannot look up %s: not served", gvr.Resource)
	}
	key := res.Key(namespace, name)
	rng, ok := l.ranges.Current().Lookup(key)
	if !ok {
		return nil, fmt.Errorf("cannot find the range of %s", key)
	}
	var obj client.Object
	var err error
	if !consistent {
		obj, err = l.cache.Get(ctx, rng.ID, key, client.Read{}, client.JSON)
	}
	if consistent || errors.Is(err, storage.ErrNotFound) {
		var cur int64
		if cur, err = l.revisions.Current(ctx); err == nil {
			obj, err = l.cache.Get(ctx, rng.ID, key, client.Read{ResourceVersion: cur, Match: string(metav1.ResourceVersionMatchNotOlderThan)}, client.JSON)
		}
	}
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%s %s/%s: %w", gvr.Resource, namespace, name, satoken.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return obj.Data, nil
}

// objectGetter reads the objects a TokenRequest refers to from etcd
// (consistent, as kube-apiserver's TokenRequest).
type objectGetter struct {
	reg   *registry.Registry
	store *storage.Store
}

func (o objectGetter) Get(ctx context.Context, resource, namespace, name string) (runtime.Object, error) {
	res, ok := o.reg.Lookup(corev1.SchemeGroupVersion.WithResource(resource))
	if !ok {
		return nil, fmt.Errorf("cannot read %s: not served", resource)
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	return o.store.Get(ctx, res, namespace, name, 0)
}
