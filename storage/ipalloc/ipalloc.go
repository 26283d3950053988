// Package ipalloc allocates the cluster IPs of Services the way
// kube-apiserver (v1.33 and later) does: every allocated address is a
// networking.k8s.io/v1 IPAddress object at /registry/ipaddresses/<ip>, whose
// parentRef names the Service, created in an etcd transaction that succeeds
// only if the key is free. Any number of gateways sharing one etcd (and
// kube-apiserver itself) can therefore allocate from the same range without
// ever handing out an address twice.
//
// Dynamic allocation picks addresses at random, preferring the upper part of
// the range and keeping the lower part (16 to 256 addresses, KEP-3070) for
// Services that ask for a specific address. The first address of the range
// is reserved for the "kubernetes" Service and only allocated on request.
package ipalloc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/registry"
)

// Errors of the allocator, wrapped with what was asked.
var (
	// ErrFull: no free address is left in the range.
	ErrFull = errors.New("ipalloc: range is full")
	// ErrAllocated: the address asked for belongs to another Service or
	// object.
	ErrAllocated = errors.New("ipalloc: address already allocated")
	// ErrNotInRange: the address asked for is not an allocatable address
	// of the range (or not an IP address).
	ErrNotInRange = errors.New("ipalloc: address not in range")
)

// DefaultCIDR is the default service CIDR: kubeadm's default
// (--service-cidr), not kube-apiserver's flag default 10.0.0.0/24, which
// holds only 254 Services.
const DefaultCIDR = "10.96.0.0/12"

// KeyPrefix is the etcd key prefix of IPAddress objects, as kube-apiserver
// stores them.
const KeyPrefix = "/registry/ipaddresses/"

// ManagedBy is the value of the ipaddress.kubernetes.io/managed-by label
// of the addresses allocated for Services, the name kube-apiserver's
// allocator uses.
const ManagedBy = "ipallocator.k8s.io"

// randomTries is how many random addresses Allocate tries before it lists
// the allocated addresses and walks the range.
const randomTries = 8

// Config configures an Allocator.
type Config struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client
	// CIDR is the service IP range, IPv4 or IPv6 (at most /64). Default
	// DefaultCIDR.
	CIDR string
	// Logger logs address collisions at debug level. Default: discard.
	Logger *slog.Logger
	// Transformers encrypt the IPAddress values as the store's
	// (--encryption-provider-config); nil: in the clear.
	Transformers *encryption.Transformers
}

// ipAddresses is the resource of the IPAddress values, as upstream's
// encryption configuration names it.
var ipAddresses = networkingv1.Resource("ipaddresses")

// Allocator hands out the addresses of one service CIDR. It keeps no state
// besides its configuration and is safe for concurrent use.
type Allocator struct {
	kv     clientv3.KV
	log    *slog.Logger
	codec  *codec.Codec
	values *encryption.Transformers
	prefix netip.Prefix
	r      ipRange
}

// New validates cfg and returns an allocator for its range.
func New(cfg Config) (*Allocator, error) {
	if cfg.Client == nil {
		return nil, errors.New("cannot make IP allocator: an etcd client is required")
	}
	if cfg.CIDR == "" {
		cfg.CIDR = DefaultCIDR
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	prefix, err := netip.ParsePrefix(cfg.CIDR)
	if err != nil {
		return nil, fmt.Errorf("cannot make IP allocator: %w", err)
	}
	r, err := newRange(prefix)
	if err != nil {
		return nil, fmt.Errorf("cannot make IP allocator for %s: %w", cfg.CIDR, err)
	}
	scheme, err := registry.NewScheme()
	if err != nil {
		return nil, fmt.Errorf("cannot make IP allocator: %w", err)
	}
	gvk := networkingv1.SchemeGroupVersion.WithKind("IPAddress")
	if !scheme.Recognizes(gvk) {
		scheme.AddKnownTypes(networkingv1.SchemeGroupVersion, &networkingv1.IPAddress{}, &networkingv1.IPAddressList{})
	}
	return &Allocator{
		kv:     cfg.Client,
		log:    cfg.Logger,
		codec:  codec.New(scheme),
		values: cfg.Transformers,
		prefix: prefix.Masked(),
		r:      r,
	}, nil
}

// CIDR returns the allocator's range.
func (a *Allocator) CIDR() netip.Prefix { return a.prefix }

// Family returns the IP family of the range.
func (a *Allocator) Family() corev1.IPFamily {
	if a.prefix.Addr().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// Reserved returns the first address of the range, the cluster IP of the
// "kubernetes" Service, which Allocate never hands out.
func (a *Allocator) Reserved() string { return a.r.first.String() }

// Allocate allocates a free address for the Service namespace/name and
// returns it. It tries random addresses of the upper part of the range,
// then walks the whole range from a random point, skipping the allocated
// addresses. ErrFull when no address is left.
func (a *Allocator) Allocate(ctx context.Context, namespace, name string) (string, error) {
	upper, lower := a.r.bands()
	if upper.size() > 0 {
		for range randomTries {
			addr := a.r.at(upper.lo + rand.Uint64N(upper.size()))
			ok, err := a.tryCreate(ctx, addr, namespace, name)
			if err != nil {
				return "", fmt.Errorf("cannot allocate a cluster IP for %s/%s: %w", namespace, name, err)
			}
			if ok {
				return addr.String(), nil
			}
		}
	}
	used, err := a.allocated(ctx)
	if err != nil {
		return "", fmt.Errorf("cannot allocate a cluster IP for %s/%s: %w", namespace, name, err)
	}
	for _, b := range []band{upper, lower} {
		if b.size() == 0 {
			continue
		}
		start := rand.Uint64N(b.size())
		for i := range b.size() {
			addr := a.r.at(b.lo + (start+i)%b.size())
			if used[addr] {
				continue
			}
			ok, err := a.tryCreate(ctx, addr, namespace, name)
			if err != nil {
				return "", fmt.Errorf("cannot allocate a cluster IP for %s/%s: %w", namespace, name, err)
			}
			if ok {
				return addr.String(), nil
			}
		}
	}
	return "", fmt.Errorf("cannot allocate a cluster IP for %s/%s in %s: %w", namespace, name, a.prefix, ErrFull)
}

// AllocateSpecific allocates ip for the Service namespace/name, for a
// Service that sets spec.clusterIP. Allocating an address the same Service
// holds already succeeds. ErrNotInRange when ip is not an allocatable
// address of the range, ErrAllocated when another object holds it.
func (a *Allocator) AllocateSpecific(ctx context.Context, ip, namespace, name string) error {
	addr, ok := a.parse(ip)
	if !ok {
		return fmt.Errorf("cannot allocate %q for %s/%s: the range is %s: %w", ip, namespace, name, a.prefix, ErrNotInRange)
	}
	obj, err := a.create(ctx, addr, namespace, name)
	if err != nil {
		return fmt.Errorf("cannot allocate %s for %s/%s: %w", addr, namespace, name, err)
	}
	if obj == nil {
		return nil
	}
	if ref := obj.Spec.ParentRef; ref != nil && *ref == serviceRef(namespace, name) {
		return nil
	}
	return fmt.Errorf("cannot allocate %s for %s/%s: held by %s: %w", addr, namespace, name, holder(obj), ErrAllocated)
}

// Release frees ip. Releasing an address that is not allocated, or not in
// the range, does nothing.
func (a *Allocator) Release(ctx context.Context, ip string) error {
	addr, ok := a.parse(ip)
	if !ok {
		return nil
	}
	if _, err := a.kv.Delete(ctx, KeyPrefix+addr.String()); err != nil {
		return fmt.Errorf("cannot release %s: %w", addr, etcdError(err))
	}
	return nil
}

// parse returns the address ip names if it is allocatable in the range.
func (a *Allocator) parse(ip string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.Zone() != "" {
		return netip.Addr{}, false
	}
	addr = addr.Unmap()
	return addr, a.r.contains(addr)
}

// tryCreate creates the IPAddress of addr and reports whether it did:
// false when the address is taken.
func (a *Allocator) tryCreate(ctx context.Context, addr netip.Addr, namespace, name string) (bool, error) {
	taken, err := a.create(ctx, addr, namespace, name)
	if err != nil {
		return false, err
	}
	if taken != nil {
		a.log.Debug("cluster IP taken, trying another", "ip", addr.String(), "service", namespace+"/"+name)
		return false, nil
	}
	return true, nil
}

// create writes the IPAddress object of addr for the Service if the key is
// free. When it is not, it returns the object that holds it (empty if it
// does not decode).
func (a *Allocator) create(ctx context.Context, addr netip.Addr, namespace, name string) (*networkingv1.IPAddress, error) {
	key := KeyPrefix + addr.String()
	value, err := a.encode(ctx, key, addr, namespace, name)
	if err != nil {
		return nil, err
	}
	resp, err := a.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return nil, etcdError(err)
	}
	if resp.Succeeded {
		return nil, nil
	}
	held := &networkingv1.IPAddress{}
	if r := resp.Responses; len(r) > 0 && r[0].GetResponseRange() != nil && len(r[0].GetResponseRange().Kvs) > 0 {
		data, _, err := a.values.FromStorage(ctx, ipAddresses, key, r[0].GetResponseRange().Kvs[0].Value)
		if err == nil {
			err = a.codec.Decode(data, held)
		}
		if err != nil {
			a.log.Warn("cannot decode stored IPAddress", "key", key, "err", err)
			held = &networkingv1.IPAddress{}
		}
	}
	return held, nil
}

// encode returns the stored form of the IPAddress of addr for the Service,
// as kube-apiserver's allocator creates it.
func (a *Allocator) encode(ctx context.Context, key string, addr netip.Addr, namespace, name string) ([]byte, error) {
	obj := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: addr.String(),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(a.Family()),
				networkingv1.LabelManagedBy:       ManagedBy,
			},
			UID:               types.UID(uuid.NewString()),
			CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second)),
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: new(serviceRef(namespace, name))},
	}
	value, err := a.codec.EncodeProtobuf(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot encode IPAddress %s: %w", addr, err)
	}
	return a.values.ToStorage(ctx, ipAddresses, key, value)
}

// allocated returns the allocated addresses of the range.
func (a *Allocator) allocated(ctx context.Context) (map[netip.Addr]bool, error) {
	resp, err := a.kv.Get(ctx, KeyPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("cannot list allocated addresses: %w", etcdError(err))
	}
	used := make(map[netip.Addr]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		addr, err := netip.ParseAddr(strings.TrimPrefix(string(kv.Key), KeyPrefix))
		if err == nil && a.prefix.Contains(addr.Unmap()) {
			used[addr.Unmap()] = true
		}
	}
	return used, nil
}

func serviceRef(namespace, name string) networkingv1.ParentReference {
	return networkingv1.ParentReference{Group: "", Resource: "services", Namespace: namespace, Name: name}
}

// holder describes what holds an address, for error messages.
func holder(obj *networkingv1.IPAddress) string {
	ref := obj.Spec.ParentRef
	if ref == nil {
		return "an IPAddress without parent reference"
	}
	res := ref.Resource
	if ref.Group != "" {
		res += "." + ref.Group
	}
	if ref.Namespace != "" {
		return res + " " + ref.Namespace + "/" + ref.Name
	}
	return res + " " + ref.Name
}

// etcdError marks an etcd client error as storage.ErrUnavailable; context
// errors are returned as they are.
func etcdError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
}
