// Package portalloc allocates Service node ports as kube-apiserver does:
// upstream's port allocator (k8s.io/kubernetes/pkg/registry/core/service/
// portallocator: a bitmap over --service-node-port-range, random picks
// preferring the upper band, the lower band kept for ports asked for) is
// kept in etcd where kube-apiserver keeps it, a v1 RangeAllocation at
// /registry/ranges/servicenodeports, and every change is a
// compare-and-swap on that key: read, restore the bitmap, allocate or
// release, write only if the key did not change meanwhile, else again.
// Any number of gateways (and kube-apiserver on the same etcd) can
// therefore allocate from one range without handing a port out twice.
// Repair (run by the controllers' leader) makes the bitmap agree with the
// Services, as upstream's repair controller.
package portalloc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/registry"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Errors of the allocator, upstream's (their messages are what clients
// see: "provided port is already allocated", "range is full").
var (
	ErrAllocated = portallocator.ErrAllocated
	ErrFull      = portallocator.ErrFull
	// ErrNotInRange wraps upstream's *portallocator.ErrNotInRange.
	ErrNotInRange = errors.New("portalloc: port not in range")
)

// Key is where kube-apiserver keeps the node port bitmap.
const Key = "/registry/ranges/servicenodeports"

// DefaultRange is kube-apiserver's --service-node-port-range default.
const DefaultRange = "30000-32767"

// Config configures an Allocator.
type Config struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client
	// Range is the node port range, "low-high"; default DefaultRange.
	Range string
	// Logger: default discard.
	Logger *slog.Logger
	// Transformers encrypt the bitmap's value as kube-apiserver's
	// "servicenodeportallocations" (--encryption-provider-config); nil:
	// in the clear.
	Transformers *encryption.Transformers
}

// nodePortAllocations is the resource of the bitmap's value, as
// kube-apiserver's storage (and so its encryption configuration) names it.
var nodePortAllocations = schema.GroupResource{Resource: "servicenodeportallocations"}

// Allocator allocates from the bitmap in etcd; safe for concurrent use.
type Allocator struct {
	kv     clientv3.KV
	codec  *codec.Codec
	values *encryption.Transformers
	pr     utilnet.PortRange
	log    *slog.Logger
}

// New checks cfg.
func New(cfg Config) (*Allocator, error) {
	if cfg.Client == nil {
		return nil, errors.New("cannot make node port allocator: an etcd client is required")
	}
	if cfg.Range == "" {
		cfg.Range = DefaultRange
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pr, err := utilnet.ParsePortRange(cfg.Range)
	if err != nil {
		return nil, fmt.Errorf("cannot make node port allocator: %w", err)
	}
	scheme, err := registry.NewScheme()
	if err != nil {
		return nil, fmt.Errorf("cannot make node port allocator: %w", err)
	}
	return &Allocator{kv: cfg.Client, codec: codec.New(scheme), values: cfg.Transformers, pr: *pr, log: cfg.Logger}, nil
}

// Range is the node port range.
func (a *Allocator) Range() utilnet.PortRange { return a.pr }

// Contains reports whether port is in the range.
func (a *Allocator) Contains(port int) bool { return a.pr.Contains(port) }

// Allocate reserves port: ErrAllocated when taken, ErrNotInRange when
// outside the range.
func (a *Allocator) Allocate(ctx context.Context, port int) error {
	err := a.change(ctx, func(p *portallocator.PortAllocator) error { return p.Allocate(port) })
	var notIn *portallocator.ErrNotInRange
	if errors.As(err, &notIn) {
		return fmt.Errorf("cannot allocate node port %d: %w: %w", port, ErrNotInRange, err)
	}
	if err != nil {
		return fmt.Errorf("cannot allocate node port %d: %w", port, err)
	}
	return nil
}

// AllocateNext reserves a free port and returns it; ErrFull when none.
func (a *Allocator) AllocateNext(ctx context.Context) (int, error) {
	var port int
	err := a.change(ctx, func(p *portallocator.PortAllocator) (err error) {
		port, err = p.AllocateNext()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cannot allocate a node port: %w", err)
	}
	return port, nil
}

// Release frees ports; ports not allocated or outside the range are
// ignored.
func (a *Allocator) Release(ctx context.Context, ports ...int) error {
	if len(ports) == 0 {
		return nil
	}
	err := a.change(ctx, func(p *portallocator.PortAllocator) error {
		for _, port := range ports {
			if err := p.Release(port); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot release node ports %v: %w", ports, err)
	}
	return nil
}

// Allocated returns the ports the bitmap holds and the revision of the
// key (0 when missing).
func (a *Allocator) Allocated(ctx context.Context) (map[int]bool, int64, error) {
	p, rev, err := a.read(ctx)
	if err != nil {
		return nil, 0, err
	}
	used := map[int]bool{}
	p.ForEach(func(port int) { used[port] = true })
	return used, rev, nil
}

// Replace writes a bitmap of exactly ports if the key is still at rev
// (0: missing); false when it changed meanwhile.
func (a *Allocator) Replace(ctx context.Context, rev int64, ports []int) (bool, error) {
	p, err := portallocator.NewInMemory(a.pr)
	if err != nil {
		return false, err
	}
	for _, port := range ports {
		if err := p.Allocate(port); err != nil {
			return false, fmt.Errorf("cannot mark node port %d: %w", port, err)
		}
	}
	return a.write(ctx, rev, p)
}

// change applies f to the current bitmap and writes the result if the key
// did not change meanwhile, trying again until it did not. An error of f
// is returned and nothing is written.
func (a *Allocator) change(ctx context.Context, f func(*portallocator.PortAllocator) error) error {
	for {
		p, rev, err := a.read(ctx)
		if err != nil {
			return err
		}
		if err := f(p); err != nil {
			return err
		}
		ok, err := a.write(ctx, rev, p)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		a.log.Debug("node port bitmap changed meanwhile, trying again")
	}
}

// read returns the bitmap in etcd (empty when missing, or when stored for
// another range: repair fills it) and the key's mod revision.
func (a *Allocator) read(ctx context.Context) (*portallocator.PortAllocator, int64, error) {
	p, err := portallocator.NewInMemory(a.pr)
	if err != nil {
		return nil, 0, err
	}
	resp, err := a.kv.Get(ctx, Key)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read the node port bitmap: %w", etcdError(err))
	}
	if len(resp.Kvs) == 0 {
		return p, 0, nil
	}
	kv := resp.Kvs[0]
	ra := &corev1.RangeAllocation{}
	data, _, err := a.values.FromStorage(ctx, nodePortAllocations, Key, kv.Value)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read the node port bitmap: %w", err)
	}
	if err := a.codec.Decode(data, ra); err != nil {
		return nil, 0, fmt.Errorf("cannot decode the node port bitmap: %w", err)
	}
	if ra.Range != a.pr.String() {
		a.log.Warn("node port bitmap is for another range, starting empty", "stored", ra.Range, "range", a.pr.String())
		return p, kv.ModRevision, nil
	}
	if err := p.Restore(a.pr, ra.Data); err != nil {
		return nil, 0, fmt.Errorf("cannot restore the node port bitmap: %w", err)
	}
	return p, kv.ModRevision, nil
}

// write stores p if the key's mod revision is still rev.
func (a *Allocator) write(ctx context.Context, rev int64, p *portallocator.PortAllocator) (bool, error) {
	snap := &corev1.RangeAllocation{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second))}}
	var ra api.RangeAllocation
	if err := p.Snapshot(&ra); err != nil {
		return false, fmt.Errorf("cannot snapshot the node port bitmap: %w", err)
	}
	snap.Range, snap.Data = ra.Range, ra.Data
	value, err := a.codec.EncodeProtobuf(snap)
	if err != nil {
		return false, fmt.Errorf("cannot encode the node port bitmap: %w", err)
	}
	if value, err = a.values.ToStorage(ctx, nodePortAllocations, Key, value); err != nil {
		return false, err
	}
	cmp := clientv3.Compare(clientv3.ModRevision(Key), "=", rev)
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(Key), "=", 0)
	}
	resp, err := a.kv.Txn(ctx).If(cmp).Then(clientv3.OpPut(Key, string(value))).Commit()
	if err != nil {
		return false, fmt.Errorf("cannot write the node port bitmap: %w", etcdError(err))
	}
	return resp.Succeeded, nil
}

// etcdError marks an etcd client error as storage.ErrUnavailable; context
// errors are returned as they are.
func etcdError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", storage.ErrUnavailable, err)
}

// ServicePorts returns the node ports svc holds, each once: its ports'
// nodePorts and its healthCheckNodePort (upstream's
// collectServiceNodePorts).
func ServicePorts(svc *corev1.Service) []int {
	var out []int
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !slices.Contains(out, int(p.NodePort)) {
			out = append(out, int(p.NodePort))
		}
	}
	if hc := int(svc.Spec.HealthCheckNodePort); hc != 0 && !slices.Contains(out, hc) {
		out = append(out, hc)
	}
	return out
}
