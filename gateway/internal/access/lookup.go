package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
	res, ok := l.reg.Lookup(corev1.SchemeGroupVersion.WithResource(resource))
	if !ok {
		return satoken.Object{}, fmt.Errorf("cannot look up %s: not served", resource)
	}
	key := res.Key(namespace, name)
	rng, ok := l.ranges.Current().Lookup(key)
	if !ok {
		return satoken.Object{}, fmt.Errorf("cannot find the range of %s", key)
	}
	obj, err := l.cache.Get(ctx, rng.ID, key, client.Read{}, client.JSON)
	if errors.Is(err, storage.ErrNotFound) {
		var cur int64
		if cur, err = l.revisions.Current(ctx); err == nil {
			obj, err = l.cache.Get(ctx, rng.ID, key, client.Read{ResourceVersion: cur, Match: string(metav1.ResourceVersionMatchNotOlderThan)}, client.JSON)
		}
	}
	if errors.Is(err, storage.ErrNotFound) {
		return satoken.Object{}, fmt.Errorf("%s %s/%s: %w", resource, namespace, name, satoken.ErrNotFound)
	}
	if err != nil {
		return satoken.Object{}, err
	}
	var m struct {
		Metadata struct {
			UID               string       `json:"uid"`
			DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj.Data, &m); err != nil {
		return satoken.Object{}, fmt.Errorf("cannot decode %s: %w", key, err)
	}
	out := satoken.Object{UID: m.Metadata.UID}
	if m.Metadata.DeletionTimestamp != nil {
		t := m.Metadata.DeletionTimestamp.Time
		out.DeletionTimestamp = &t
	}
	return out, nil
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
