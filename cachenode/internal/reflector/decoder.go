package reflector

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strconv"
	"sync"

	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// decoder turns etcd values of one range into store entries.
type decoder struct {
	res     *registry.Resource
	reg     *registry.Registry
	codec   *codec.Codec
	eager   bool
	toProto store.ProtobufFunc
	values  *encryption.Transformers // nil: values stored as they are
}

func newDecoder(rng *ranges.Range, reg *registry.Registry, c *codec.Codec, eager bool, values *encryption.Transformers) (*decoder, error) {
	d := &decoder{res: rng.Resource, reg: reg, codec: c, eager: eager, values: values}
	if _, err := reg.NewStored(d.res); err != nil {
		return nil, err
	}
	if d.res.Unstructured() {
		// Custom resources have no protobuf form: JSON only.
		d.eager = false
	} else {
		d.toProto = d.protobufFromJSON
	}
	return d, nil
}

// protobufFromJSON is the lazy protobuf encoder of entries.
func (d *decoder) protobufFromJSON(json []byte) ([]byte, error) {
	obj, err := d.reg.NewStored(d.res)
	if err != nil {
		return nil, err
	}
	if err := d.codec.Decode(json, obj); err != nil {
		return nil, err
	}
	return d.codec.EncodeRawProtobuf(obj)
}

// entry decodes value, stored at key, as the object served at revision rv
// (its mod revision, or for a deleted object the delete revision).
func (d *decoder) entry(key string, value []byte, rv int64) (*store.Entry, error) {
	obj, err := d.reg.NewStored(d.res)
	if err != nil {
		return nil, err
	}
	data, _, err := d.values.FromStorage(context.Background(), d.res.GVR().GroupResource(), key, value)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", storage.ErrInvalidObject, err)
	}
	if err := d.codec.Decode(data, obj); err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w: %w", key, storage.ErrInvalidObject, err)
	}
	return d.entryFromObject(key, obj, rv)
}

func (d *decoder) entryFromObject(key string, obj runtime.Object, rv int64) (*store.Entry, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot read metadata of %s: %w: %w", key, storage.ErrInvalidObject, err)
	}
	acc.SetResourceVersion(strconv.FormatInt(rv, 10))
	ns, name, ok := d.res.SplitKey(key)
	if !ok {
		ns, name = acc.GetNamespace(), acc.GetName()
	}
	var f fields.Set
	if d.res.Fields != nil {
		f = d.res.Fields(obj)
	}
	if f == nil {
		f = make(fields.Set, 2)
	}
	f["metadata.name"] = name
	if d.res.Namespaced {
		f["metadata.namespace"] = ns
	}
	json, err := d.codec.EncodeJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot encode %s: %w: %w", key, storage.ErrInvalidObject, err)
	}
	var proto []byte
	if d.eager {
		if proto, err = d.codec.EncodeRawProtobuf(obj); err != nil {
			return nil, fmt.Errorf("cannot encode %s: %w: %w", key, storage.ErrInvalidObject, err)
		}
	}
	return store.NewEntry(key, ns, name, rv, labels.Set(acc.GetLabels()), f, json, proto, d.toProto), nil
}

// rewrite returns e's object served at another revision (a deleted
// object carries the delete revision).
func (d *decoder) rewrite(e *store.Entry, rv int64) (*store.Entry, error) {
	return d.entry(e.Key, e.JSON, rv)
}

// kv is one key and value of a list page.
type kv struct {
	key   string
	value []byte
	rev   int64
}

// entries decodes kvs on up to GOMAXPROCS goroutines, which it waits for.
// Values that do not decode are reported to bad and left out.
func (d *decoder) entries(kvs []kv, bad func(x kv, err error)) []*store.Entry {
	out := make([]*store.Entry, len(kvs))
	errs := make([]error, len(kvs))
	workers := min(goruntime.GOMAXPROCS(0), 8, (len(kvs)+63)/64)
	if workers <= 1 {
		for i, x := range kvs {
			out[i], errs[i] = d.entry(x.key, x.value, x.rev)
		}
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < len(kvs); i += workers {
					out[i], errs[i] = d.entry(kvs[i].key, kvs[i].value, kvs[i].rev)
				}
			})
		}
		wg.Wait()
	}
	n := 0
	for i, e := range out {
		if errs[i] != nil {
			bad(kvs[i], errs[i])
			continue
		}
		out[n] = e
		n++
	}
	return out[:n]
}
