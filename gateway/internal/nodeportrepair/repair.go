// Package nodeportrepair makes the node port bitmap (storage/portalloc)
// agree with the Services, as kube-apiserver's node port repair
// controller (pkg/registry/core/service/portallocator/controller) does
// every three minutes: a port a Service uses but the bitmap lacks is
// marked; a port the bitmap holds but no Service uses (a create that
// failed after allocating, an update that dropped it) is kept for three
// passes — it may belong to a write in flight — and then released; ports
// outside the range and ports two Services share are logged. The bitmap
// is written only if it did not change since it was read. Run by the
// controllers' leader.
package nodeportrepair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/portalloc"
	"github.com/kgate/kgate/storage/registry"
)

// DefaultInterval is upstream's repair period.
const DefaultInterval = 3 * time.Minute

// leakPasses is upstream's numRepairsBeforeLeakCleanup.
const leakPasses = 3

// Store lists Services (storage.Store).
type Store interface {
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
}

// Ports is the bitmap (portalloc.Allocator).
type Ports interface {
	Allocated(ctx context.Context) (map[int]bool, int64, error)
	Replace(ctx context.Context, rev int64, ports []int) (bool, error)
	Contains(port int) bool
}

// Config configures a Repair.
type Config struct {
	Store    Store              // required
	Registry *registry.Registry // required
	Ports    Ports              // required
	Logger   *slog.Logger       // required
	// Interval between passes; default DefaultInterval.
	Interval time.Duration
}

// Repair is the repair loop; its leak counts live as long as it does.
type Repair struct {
	cfg   Config
	res   *registry.Resource
	leaks map[int]int // port → passes it was found leaked
}

// New checks cfg.
func New(cfg Config) (*Repair, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Ports == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the node port repair: Store, Registry, Ports and Logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	res, ok := cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("services"))
	if !ok {
		return nil, errors.New("cannot make the node port repair: services are not served")
	}
	return &Repair{cfg: cfg, res: res, leaks: map[int]int{}}, nil
}

// Run repairs now and every Interval until ctx ends.
func (r *Repair) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("node port repair failed, trying again later", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once makes one pass.
func (r *Repair) Once(ctx context.Context) error {
	stored, rev, err := r.cfg.Ports.Allocated(ctx)
	if err != nil {
		return err
	}
	used := map[int]bool{}
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := r.cfg.Store.List(ctx, r.res, "", opts)
		if err != nil {
			return fmt.Errorf("cannot list services: %w", err)
		}
		for _, obj := range page.Items {
			svc, ok := obj.(*corev1.Service)
			if !ok {
				continue
			}
			for _, port := range portalloc.ServicePorts(svc) {
				switch {
				case !r.cfg.Ports.Contains(port):
					r.cfg.Logger.Warn("the node port of a service is not in the range; please recreate the service", "service", svc.Namespace+"/"+svc.Name, "port", port)
				case used[port]:
					r.cfg.Logger.Warn("a node port is used by more than one service; please recreate", "service", svc.Namespace+"/"+svc.Name, "port", port)
				default:
					used[port] = true
					if !stored[port] {
						r.cfg.Logger.Warn("the node port of a service was not allocated; repairing", "service", svc.Namespace+"/"+svc.Name, "port", port)
					}
					delete(r.leaks, port)
				}
			}
		}
		if page.Last == "" {
			break
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
	keep := make([]int, 0, len(used))
	for port := range used {
		keep = append(keep, port)
	}
	for port := range stored {
		if used[port] {
			continue
		}
		if r.leaks[port] < leakPasses {
			r.leaks[port]++
			keep = append(keep, port) // maybe a write in flight
			continue
		}
		r.cfg.Logger.Info("node port leaked; releasing", "port", port)
		delete(r.leaks, port)
	}
	for port := range r.leaks {
		if !stored[port] {
			delete(r.leaks, port) // released by someone else
		}
	}
	slices.Sort(keep)
	if sameSet(stored, keep) {
		return nil
	}
	ok, err := r.cfg.Ports.Replace(ctx, rev, keep)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the node port bitmap changed during the repair; next pass")
	}
	return nil
}

func sameSet(m map[int]bool, list []int) bool {
	if len(m) != len(list) {
		return false
	}
	for _, p := range list {
		if !m[p] {
			return false
		}
	}
	return true
}
