// Package encryption turns kube-apiserver's --encryption-provider-config
// into each resource's value transformer, with upstream's own loader and
// providers (identity, aescbc, aesgcm, secretbox, KMS v1 and v2), so the
// values kgate writes are what kube-apiserver writes and reads, byte for
// byte, and the other way round. The authenticated data of a value is its
// full etcd key, as upstream's store passes it.
package encryption

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
)

// Transformers are the transformers of every resource. A nil
// *Transformers stores values as they are (no configuration).
type Transformers struct {
	rt  value.ResourceTransformers
	byR sync.Map // schema.GroupResource → value.Transformer
}

// Load reads the EncryptionConfiguration file at path. KMS plugins it
// names are dialled under ctx, which must outlive the Transformers.
func Load(ctx context.Context, path string) (*Transformers, error) {
	if path == "" {
		return nil, errors.New("cannot load encryption configuration: no file given")
	}
	cfg, err := encryptionconfig.LoadEncryptionConfig(ctx, path, false, "")
	if err != nil {
		return nil, fmt.Errorf("cannot load encryption configuration %s: %w", path, err)
	}
	return &Transformers{rt: encryptionconfig.StaticTransformers(cfg.Transformers)}, nil
}

// For is gr's transformer: the configured providers, or upstream's
// identity that refuses encrypted values for a resource not configured.
func (t *Transformers) For(gr schema.GroupResource) value.Transformer {
	if v, ok := t.byR.Load(gr); ok {
		return v.(value.Transformer)
	}
	v, _ := t.byR.LoadOrStore(gr, t.rt.TransformerForResource(gr))
	return v.(value.Transformer)
}

// ToStorage is the value stored at key for data, an object of gr.
func (t *Transformers) ToStorage(ctx context.Context, gr schema.GroupResource, key string, data []byte) ([]byte, error) {
	if t == nil {
		return data, nil
	}
	out, err := t.For(gr).TransformToStorage(ctx, data, value.DefaultContext(key))
	if err != nil {
		return nil, fmt.Errorf("cannot encrypt %s: %w", key, err)
	}
	return out, nil
}

// FromStorage is the object data of the value stored at key; stale says
// the value was not written with the first (writing) provider, so that
// an update should write it again even when nothing changed.
func (t *Transformers) FromStorage(ctx context.Context, gr schema.GroupResource, key string, stored []byte) (data []byte, stale bool, err error) {
	if t == nil {
		return stored, false, nil
	}
	data, stale, err = t.For(gr).TransformFromStorage(ctx, stored, value.DefaultContext(key))
	if err != nil {
		return nil, false, fmt.Errorf("cannot decrypt %s: %w", key, err)
	}
	return data, stale, nil
}
