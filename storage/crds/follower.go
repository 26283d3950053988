// Package crds keeps the registry serving the custom resources of the
// CustomResourceDefinitions in etcd: it lists them, then watches their
// prefix, and for each established CRD registers one resource per served
// version (Resources), replacing them when the CRD changes and removing
// them when it goes or stops being established. Every gateway and cache
// node runs one (storage/backend opens it), so all of them serve and
// reflect the same custom resources within moments of a change; the
// initial list is done before Start returns, so a member that starts
// later knows every CRD before it reports ready.
package crds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/registry"
)

// Prefix is the etcd key prefix of CustomResourceDefinitions, as
// kube-apiserver keys them.
const Prefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

// ErrConfig is wrapped by the errors of an invalid Config.
var ErrConfig = errors.New("crds: invalid config")

// Config configures a Follower.
type Config struct {
	// Etcd is read and watched; required. The caller owns it.
	Etcd *clientv3.Client
	// Registry gets the custom resources; required.
	Registry *registry.Registry
	// Logger is required.
	Logger *slog.Logger
	// Transformers decrypt stored CRDs (--encryption-provider-config); nil
	// reads them as they are.
	Transformers *encryption.Transformers
	// RetryDelay is the pause before listing again after the watch
	// failed. Default 1s.
	RetryDelay time.Duration
}

// Follower follows the CRDs in etcd into the registry.
type Follower struct {
	cfg   Config
	codec *codec.Codec

	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex // guards served and rev (written by the follow loop)
	// served is what each CRD (by name) has registered.
	served map[string]served
	rev    int64 // the etcd revision the registry reflects
}

// served is what one CRD has registered.
type served struct {
	// key identifies what the resources were made of (spec and accepted
	// names): a CRD event that leaves it unchanged (a status condition's
	// timestamp) changes nothing.
	key  string
	gvrs []schema.GroupVersionResource
}

// Start lists the CRDs, registers the resources of the established ones,
// and follows their changes until Close.
func Start(cfg Config) (*Follower, error) {
	if cfg.Etcd == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, fmt.Errorf("%w: Etcd, Registry and Logger are required", ErrConfig)
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("cannot build the CRD scheme: %w", err)
	}
	f := &Follower{cfg: cfg, codec: codec.New(s), served: map[string]served{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	if err := f.list(ctx); err != nil {
		cancel()
		return nil, err
	}
	go f.run(ctx)
	return f, nil
}

// Close stops following and waits for the loop to end. The registered
// resources stay.
func (f *Follower) Close() {
	f.cancel()
	<-f.done
}

// Revision returns the etcd revision of the CRDs the registry reflects.
func (f *Follower) Revision() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

// run watches from the last revision, listing again when the watch fails
// (compaction, a lost leader), until ctx ends.
func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	for {
		err := f.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		f.cfg.Logger.Warn("CRD watch ended, listing again", "err", err)
		t := time.NewTimer(f.cfg.RetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := f.list(ctx); err != nil && ctx.Err() == nil {
			f.cfg.Logger.Warn("cannot list CRDs", "err", err)
		}
	}
}

// list reads every CRD and makes the registry serve exactly the
// established ones.
func (f *Follower) list(ctx context.Context) error {
	resp, err := f.cfg.Etcd.Get(ctx, Prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("cannot list CRDs: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), Prefix)
		seen[name] = true
		f.apply(name, f.decode(kv.Key, kv.Value))
	}
	for name := range f.served {
		if !seen[name] {
			f.apply(name, nil)
		}
	}
	f.rev = resp.Header.Revision
	return nil
}

// watch applies CRD events after f.rev until the watch fails.
func (f *Follower) watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := f.cfg.Etcd.Watch(wctx, Prefix, clientv3.WithPrefix(), clientv3.WithRev(f.Revision()+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("cannot watch CRDs: %w", err)
		}
		f.mu.Lock()
		for _, ev := range resp.Events {
			name := strings.TrimPrefix(string(ev.Kv.Key), Prefix)
			var crd *apiextensionsv1.CustomResourceDefinition
			if ev.Type == clientv3.EventTypePut {
				crd = f.decode(ev.Kv.Key, ev.Kv.Value)
			}
			f.apply(name, crd)
			f.rev = ev.Kv.ModRevision
		}
		f.mu.Unlock()
	}
	return errors.New("cannot watch CRDs: the watch channel closed")
}

var crdResource = apiextensionsv1.Resource("customresourcedefinitions")

// decode returns the CRD stored at key, or nil (logged) when the value is
// not one: such a CRD serves nothing.
func (f *Follower) decode(key, value []byte) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	data, _, err := f.cfg.Transformers.FromStorage(context.Background(), crdResource, string(key), value)
	if err == nil {
		err = f.codec.Decode(data, crd)
	}
	if err != nil {
		f.cfg.Logger.Warn("cannot decode a CRD, serving none of its resources", "key", string(key), "err", err)
		return nil
	}
	return crd
}

// apply makes the registry serve what crd (nil: nothing) serves in place
// of what the CRD named name served before. Called with mu held.
func (f *Follower) apply(name string, crd *apiextensionsv1.CustomResourceDefinition) {
	var want []registry.Resource
	key := ""
	if crd != nil {
		if want = Resources(crd); len(want) > 0 {
			key = fingerprint(crd)
		}
	}
	old := f.served[name]
	if old.key == key {
		return
	}
	gvrs := make([]schema.GroupVersionResource, len(want))
	for i := range want {
		gvrs[i] = want[i].GVR()
	}
	if err := f.cfg.Registry.Replace(old.gvrs, want); err != nil {
		// Another CRD or a built-in serves one of its resources
		// (upstream's naming controller would not have accepted the
		// names): serve none of them, and stop serving the old ones.
		f.cfg.Logger.Warn("cannot serve the resources of a CRD", "crd", name, "err", err)
		if err := f.cfg.Registry.Remove(old.gvrs...); err != nil {
			f.cfg.Logger.Error("cannot stop serving the resources of a CRD", "crd", name, "err", err)
		}
		delete(f.served, name)
		return
	}
	if key == "" {
		delete(f.served, name)
		f.cfg.Logger.Info("custom resources no longer served", "crd", name)
		return
	}
	f.served[name] = served{key: key, gvrs: gvrs}
	f.cfg.Logger.Info("custom resources served", "crd", name, "resources", gvrs)
}

// fingerprint identifies what crd's resources are made of. The CRD was
// decoded from JSON or protobuf, so it encodes.
func fingerprint(crd *apiextensionsv1.CustomResourceDefinition) string {
	b, _ := json.Marshal(struct {
		UID   string
		Spec  apiextensionsv1.CustomResourceDefinitionSpec
		Names apiextensionsv1.CustomResourceDefinitionNames
	}{string(crd.UID), crd.Spec, crd.Status.AcceptedNames})
	return string(b)
}
