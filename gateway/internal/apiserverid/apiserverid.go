// Package apiserverid keeps the apiserver identity Leases kube-apiserver
// keeps (the APIServerIdentity feature, on by default): every gateway
// holds its own coordination.k8s.io/v1 Lease apiserver-<hash> in
// kube-system, labelled apiserver.kubernetes.io/identity=kube-apiserver
// and kubernetes.io/hostname, holderIdentity <name>_<uuid>, duration one
// hour, renewed every ten seconds (component-helpers' lease controller
// as upstream configures it); and the controllers' leader deletes the
// identity Leases that expired (upstream's apiserverleasegc), once an
// hour. Consumers (kubectl get leases -l apiserver.kubernetes.io/identity,
// the storage version and peer proxy machinery) count the live servers
// from them.
package apiserverid

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/cryptobyte"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// kube-apiserver's values (k8s.io/kubernetes/pkg/controlplane/apiserver).
const (
	// LabelKey marks identity Leases; its value names the component.
	LabelKey = "apiserver.kubernetes.io/identity"
	// Component is the value of LabelKey on kube-apiserver's Leases.
	Component = "kube-apiserver"
	// Namespace holds the identity Leases.
	Namespace = metav1.NamespaceSystem
	// DefaultLeaseDuration is the Leases' spec.leaseDurationSeconds.
	DefaultLeaseDuration = time.Hour
	// DefaultRenewInterval is how often a server renews its Lease.
	DefaultRenewInterval = 10 * time.Second
	// DefaultGCInterval is how often expired Leases are collected.
	DefaultGCInterval = time.Hour
)

// Store is what the keeper and the collector need of storage.Store.
type Store interface {
	Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error)
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
	Delete(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error)
}

// Name returns the identity Lease name of a server, as k8s.io/apiserver
// derives it: "apiserver-" and the base32 of a SHA-256 over the hostname
// and "kube-apiserver". Several gateways may share a host (kgate dev), so
// kgate adds the server's advertised host:port to the hash (none: the
// name is upstream's).
func Name(hostname, advertise string) string {
	b := cryptobyte.NewBuilder(nil)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(hostname)) })
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(Component)) })
	if advertise != "" {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(advertise)) })
	}
	data := b.BytesOrPanic() // only fails on a field over 64 KiB
	hash := sha256.Sum256(data)
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(hash[:16]))
}

// Config configures a Keeper.
type Config struct {
	Store    Store              // required
	Registry *registry.Registry // required; serves coordination.k8s.io/v1 leases
	Logger   *slog.Logger       // required
	// Hostname of the server; default os.Hostname.
	Hostname string
	// Advertise is the server's advertised host:port (part of the name).
	Advertise string
	// LeaseDuration and RenewInterval: defaults DefaultLeaseDuration,
	// DefaultRenewInterval.
	LeaseDuration, RenewInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Keeper creates and renews one server's identity Lease.
type Keeper struct {
	cfg      Config
	res      *registry.Resource
	name     string
	identity string // holderIdentity
}

// New checks cfg and names the Lease; Run keeps it.
func New(cfg Config) (*Keeper, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the apiserver identity lease: Store, Registry and Logger are required")
	}
	if cfg.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("cannot make the apiserver identity lease: %w", err)
		}
		cfg.Hostname = h
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = DefaultRenewInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	res, err := leases(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("cannot make the apiserver identity lease: %w", err)
	}
	name := Name(cfg.Hostname, cfg.Advertise)
	return &Keeper{cfg: cfg, res: res, name: name, identity: name + "_" + uuid.NewString()}, nil
}

// Name is the Lease's name.
func (k *Keeper) Name() string { return k.name }

// Run renews the Lease now and every RenewInterval until ctx ends. The
// Lease is left to expire (upstream deletes none at shutdown).
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTicker(k.cfg.RenewInterval)
	defer t.Stop()
	for {
		if err := k.Renew(ctx); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("cannot renew the apiserver identity lease", "lease", k.name, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Renew creates the Lease or sets its renewTime, duration and labels
// (holderIdentity is kept, as component-helpers' lease controller keeps it).
func (k *Keeper) Renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RenewInterval)
	defer cancel()
	_, err := k.cfg.Store.Update(ctx, k.res, Namespace, k.name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		l, ok := cur.(*coordinationv1.Lease)
		if !ok {
			return nil, fmt.Errorf("cannot renew lease %s: stored as %T", k.name, cur)
		}
		l = l.DeepCopy()
		k.stamp(l)
		return l, nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: k.name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &k.identity},
		}
		k.stamp(l)
		_, err = k.cfg.Store.Create(ctx, k.res, l)
	}
	if err != nil {
		return fmt.Errorf("cannot renew lease %s/%s: %w", Namespace, k.name, err)
	}
	return nil
}

// stamp sets what every renewal sets: duration, renew time, labels.
func (k *Keeper) stamp(l *coordinationv1.Lease) {
	seconds := int32(k.cfg.LeaseDuration / time.Second)
	l.Spec.LeaseDurationSeconds = &seconds
	l.Spec.RenewTime = &metav1.MicroTime{Time: k.cfg.Now()}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelKey] = Component
	l.Labels[corev1.LabelHostname] = k.cfg.Hostname
}

func leases(reg *registry.Registry) (*registry.Resource, error) {
	res, ok := reg.Lookup(coordinationv1.SchemeGroupVersion.WithResource("leases"))
	if !ok {
		return nil, errors.New("coordination.k8s.io/v1 leases are not served")
	}
	return res, nil
}
