package kubernetesservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
)

// kube-apiserver's lease endpoint reconciler values
// (k8s.io/kubernetes/pkg/controlplane/reconcilers, --endpoint-reconciler-type=lease).
const (
	// LeasePrefix holds one key per live server, named by its IP, whose
	// value is an Endpoints object of that one address, written with an
	// etcd lease of LeaseTTL.
	LeasePrefix = "/registry/masterleases/"
	// DefaultLeaseTTL is the key's time to live.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultInterval is how often a server refreshes its key and the
	// leader reconciles the Service and its endpoints.
	DefaultInterval = 10 * time.Second
)

// Leases reads and writes the per-server keys under LeasePrefix.
type Leases struct {
	kv    clientv3.KV
	lease clientv3.Lease
	codec *codec.Codec
	ttl   time.Duration
}

// NewLeases returns the keys over cli; ttl 0 is DefaultLeaseTTL.
func NewLeases(cli *clientv3.Client, c *codec.Codec, ttl time.Duration) (*Leases, error) {
	if cli == nil || c == nil {
		return nil, errors.New("cannot make the apiserver endpoint leases: an etcd client and a codec are required")
	}
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return &Leases{kv: cli, lease: cli, codec: c, ttl: ttl}, nil
}

// Update writes ip's key with a fresh lease of the TTL, as upstream's
// storageLeases.UpdateLease (a new TTL each time).
func (l *Leases) Update(ctx context.Context, ip netip.Addr) error {
	value, err := l.codec.EncodeJSON(&corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: ip.String()},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: ip.String()}}}},
	})
	if err != nil {
		return fmt.Errorf("cannot encode the endpoint lease of %s: %w", ip, err)
	}
	grant, err := l.lease.Grant(ctx, int64(l.ttl/time.Second))
	if err != nil {
		return fmt.Errorf("cannot grant the endpoint lease of %s: %w", ip, etcdError(err))
	}
	if _, err := l.kv.Put(ctx, LeasePrefix+ip.String(), string(value), clientv3.WithLease(grant.ID)); err != nil {
		return fmt.Errorf("cannot write the endpoint lease of %s: %w", ip, etcdError(err))
	}
	return nil
}

// Remove deletes ip's key (a server leaving).
func (l *Leases) Remove(ctx context.Context, ip netip.Addr) error {
	if _, err := l.kv.Delete(ctx, LeasePrefix+ip.String()); err != nil {
		return fmt.Errorf("cannot remove the endpoint lease of %s: %w", ip, etcdError(err))
	}
	return nil
}

// List returns the IPs of the live servers, sorted, read from the
// values as upstream's ListLeases reads them (kube-apiserver's keys on a
// shared etcd count too).
func (l *Leases) List(ctx context.Context) ([]string, error) {
	resp, err := l.kv.Get(ctx, LeasePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cannot list the endpoint leases: %w", etcdError(err))
	}
	seen := map[string]bool{}
	var ips []string
	for _, kv := range resp.Kvs {
		ep := &corev1.Endpoints{}
		if err := l.codec.Decode(kv.Value, ep); err != nil {
			return nil, fmt.Errorf("cannot decode the endpoint lease %s: %w", kv.Key, err)
		}
		if len(ep.Subsets) == 0 || len(ep.Subsets[0].Addresses) == 0 {
			continue
		}
		if ip := ep.Subsets[0].Addresses[0].IP; !seen[ip] {
			seen[ip] = true
			ips = append(ips, ip)
		}
	}
	sort.Strings(ips)
	return ips, nil
}

// Keeper refreshes one server's key every interval and removes it when
// it stops: what each kube-apiserver does for itself.
type Keeper struct {
	leases   *Leases
	ip       netip.Addr
	interval time.Duration
	log      *slog.Logger
}

// NewKeeper keeps ip's key; interval 0 is DefaultInterval.
func NewKeeper(l *Leases, ip netip.Addr, interval time.Duration, log *slog.Logger) (*Keeper, error) {
	if l == nil || !ip.IsValid() || log == nil {
		return nil, errors.New("cannot make the apiserver endpoint lease keeper: leases, an IP and a logger are required")
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Keeper{leases: l, ip: ip, interval: interval, log: log}, nil
}

// Run refreshes the key until ctx ends, then removes it.
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		if err := k.leases.Update(ctx, k.ip); err != nil && ctx.Err() == nil {
			k.log.Warn("cannot refresh the apiserver endpoint lease", "ip", k.ip, "err", err)
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := k.leases.Remove(rctx, k.ip); err != nil {
				k.log.Warn("cannot remove the apiserver endpoint lease", "ip", k.ip, "err", err)
			}
			return
		case <-t.C:
		}
	}
}

// etcdError marks an etcd client error as storage.ErrUnavailable; context
// errors are returned as they are.
func etcdError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
}
