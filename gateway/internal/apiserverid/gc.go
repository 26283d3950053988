package apiserverid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// GCConfig configures a GC.
type GCConfig struct {
	Store    Store              // required
	Registry *registry.Registry // required
	Logger   *slog.Logger       // required
	// Interval between collections; default DefaultGCInterval.
	Interval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// GC deletes expired identity Leases (label LabelKey=Component in
// Namespace), as kube-apiserver's apiserverleasegc controller: a Lease
// without renewTime or duration counts as expired; each is read again
// before it is deleted, and deleted only if still expired then (the
// delete is conditional on that read, so a renewal in between wins).
type GC struct {
	cfg GCConfig
	res *registry.Resource
}

// NewGC checks cfg.
func NewGC(cfg GCConfig) (*GC, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the apiserver lease collector: Store, Registry and Logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultGCInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	res, err := leases(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("cannot make the apiserver lease collector: %w", err)
	}
	return &GC{cfg: cfg, res: res}, nil
}

// Run collects now and every Interval until ctx ends.
func (g *GC) Run(ctx context.Context) {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := g.Collect(ctx); err != nil && ctx.Err() == nil {
			g.cfg.Logger.Warn("cannot collect expired apiserver identity leases", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Collect deletes the expired identity Leases and returns their names.
func (g *GC) Collect(ctx context.Context) ([]string, error) {
	var deleted []string
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := g.cfg.Store.List(ctx, g.res, Namespace, opts)
		if err != nil {
			return deleted, fmt.Errorf("cannot list leases: %w", err)
		}
		for _, obj := range page.Items {
			l, ok := obj.(*coordinationv1.Lease)
			if !ok || l.Labels[LabelKey] != Component || !g.expired(l) {
				continue
			}
			gone, err := g.delete(ctx, l.Name)
			if err != nil {
				g.cfg.Logger.Warn("cannot delete expired apiserver identity lease", "lease", l.Name, "err", err)
				continue
			}
			if gone {
				deleted = append(deleted, l.Name)
			}
		}
		if page.Last == "" {
			return deleted, nil
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
}

// delete deletes the Lease name if its current state is still expired.
func (g *GC) delete(ctx context.Context, name string) (bool, error) {
	_, deleted, err := g.cfg.Store.Delete(ctx, g.res, Namespace, name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		if l, ok := cur.(*coordinationv1.Lease); ok && g.expired(l) {
			return cur, storage.DeleteRemove, nil
		}
		return cur, storage.DeleteKeep, nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil // another collector took it: legit, as upstream says
	}
	return deleted, err
}

// expired is upstream's isLeaseExpired.
func (g *GC) expired(l *coordinationv1.Lease) bool {
	s := l.Spec
	return s.RenewTime == nil || s.LeaseDurationSeconds == nil ||
		s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds)*time.Second).Before(g.cfg.Now())
}
