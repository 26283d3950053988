// Package iprepair makes the IPAddress objects of Service cluster IPs
// (storage/ipalloc) agree with the Services, as kube-apiserver's
// RepairIPAddress controller (pkg/registry/core/service/ipallocator/
// controller) does: a cluster IP a Service uses without an IPAddress gets
// one ("ClusterIPNotAllocated"); one whose IPAddress names another object
// is logged ("ClusterIPAlreadyAllocated"), as is one outside the range;
// an IPAddress the allocator made (managed by ipallocator.k8s.io) whose
// Service is gone or no longer uses the address — a create that failed
// after allocating, a delete cut short — is kept for three passes (a
// create in flight holds its address before its Service is stored) and
// then deleted, only if it did not change meanwhile. Run by the
// controllers' leader.
package iprepair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/registry"
)

// DefaultInterval is how often the repair runs (upstream's node port
// repair period; its IP repair also resyncs on a timer).
const DefaultInterval = 3 * time.Minute

// leakPasses is how many passes an orphaned IPAddress survives, as the
// node port repair keeps a leaked port (upstream's
// numRepairsBeforeLeakCleanup).
const leakPasses = 3

// Store lists and deletes (storage.Store).
type Store interface {
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
	Delete(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error)
}

// IPs allocates a Service's address (ipalloc.Allocator).
type IPs interface {
	AllocateSpecific(ctx context.Context, ip, namespace, name string) error
}

// Config configures a Repair.
type Config struct {
	Store    Store              // required
	Registry *registry.Registry // required
	IPs      IPs                // required
	Logger   *slog.Logger       // required
	// Interval between passes; default DefaultInterval.
	Interval time.Duration
}

// Repair is the repair loop; its leak counts live as long as it does.
type Repair struct {
	cfg       Config
	services  *registry.Resource
	addresses *registry.Resource
	leaks     map[string]int // address → passes it was found orphaned
}

// New checks cfg.
func New(cfg Config) (*Repair, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.IPs == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the cluster IP repair: Store, Registry, IPs and Logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	svcs, ok := cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("services"))
	if !ok {
		return nil, errors.New("cannot make the cluster IP repair: services are not served")
	}
	addrs, ok := cfg.Registry.Lookup(networkingv1.SchemeGroupVersion.WithResource("ipaddresses"))
	if !ok {
		return nil, errors.New("cannot make the cluster IP repair: ipaddresses are not served")
	}
	return &Repair{cfg: cfg, services: svcs, addresses: addrs, leaks: map[string]int{}}, nil
}

// Run repairs now and every Interval until ctx ends.
func (r *Repair) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("cluster IP repair failed, trying again later", "err", err)
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
	addrs := map[string]*networkingv1.IPAddress{}
	if err := r.each(ctx, r.addresses, func(obj runtime.Object) {
		if a, ok := obj.(*networkingv1.IPAddress); ok {
			addrs[a.Name] = a
		}
	}); err != nil {
		return fmt.Errorf("cannot list ipaddresses: %w", err)
	}
	used := map[string]string{} // address → namespace/name of the Service using it
	if err := r.each(ctx, r.services, func(obj runtime.Object) {
		if svc, ok := obj.(*corev1.Service); ok {
			r.service(ctx, svc, addrs, used)
		}
	}); err != nil {
		return fmt.Errorf("cannot list services: %w", err)
	}
	for ip, a := range addrs {
		if a.Labels[networkingv1.LabelManagedBy] != ipalloc.ManagedBy {
			continue // not the allocator's
		}
		if ref := a.Spec.ParentRef; ref != nil && ref.Group == "" && ref.Resource == "services" && used[ip] == ref.Namespace+"/"+ref.Name {
			delete(r.leaks, ip)
			continue
		}
		if r.leaks[ip] < leakPasses {
			r.leaks[ip]++ // maybe a create in flight
			continue
		}
		delete(r.leaks, ip)
		pre := storage.Preconditions{UID: string(a.UID)}
		if _, _, err := r.cfg.Store.Delete(ctx, r.addresses, "", ip, pre, remove); err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrConflict) {
			return fmt.Errorf("cannot delete the orphaned IPAddress %s: %w", ip, err)
		}
		r.cfg.Logger.Info("cluster IP leaked; released", "ip", ip, "parent", parent(a))
	}
	for ip := range r.leaks {
		if addrs[ip] == nil {
			delete(r.leaks, ip) // gone meanwhile
		}
	}
	return nil
}

// service checks the cluster IPs of svc against their IPAddresses,
// allocating the missing ones, and records them in used.
func (r *Repair) service(ctx context.Context, svc *corev1.Service, addrs map[string]*networkingv1.IPAddress, used map[string]string) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	key := svc.Namespace + "/" + svc.Name
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if ip == "" || ip == corev1.ClusterIPNone {
			continue
		}
		if other, ok := used[ip]; ok {
			r.cfg.Logger.Warn("ClusterIPAlreadyAllocated: a cluster IP is used by more than one service; please recreate", "ip", ip, "service", key, "other", other)
			continue
		}
		used[ip] = key
		a, ok := addrs[ip]
		if !ok {
			err := r.cfg.IPs.AllocateSpecific(ctx, ip, svc.Namespace, svc.Name)
			switch {
			case errors.Is(err, ipalloc.ErrNotInRange):
				r.cfg.Logger.Warn("ClusterIPOutOfRange: the cluster IP of a service is not in the service CIDR; please recreate the service", "ip", ip, "service", key)
			case err != nil:
				r.cfg.Logger.Warn("ClusterIPNotAllocated: cannot repair the cluster IP of a service", "ip", ip, "service", key, "err", err)
			default:
				r.cfg.Logger.Warn("ClusterIPNotAllocated: the cluster IP of a service was not allocated; repaired", "ip", ip, "service", key)
			}
			continue
		}
		if ref := a.Spec.ParentRef; ref == nil || ref.Group != "" || ref.Resource != "services" || ref.Namespace != svc.Namespace || ref.Name != svc.Name {
			r.cfg.Logger.Warn("ClusterIPAlreadyAllocated: the cluster IP of a service is held by another object; please recreate the service", "ip", ip, "service", key, "holder", parent(a))
		}
	}
}

// each calls f with every object of res, page by page at one revision.
func (r *Repair) each(ctx context.Context, res *registry.Resource, f func(runtime.Object)) error {
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := r.cfg.Store.List(ctx, res, "", opts)
		if err != nil {
			return err
		}
		for _, obj := range page.Items {
			f(obj)
		}
		if page.Last == "" {
			return nil
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
}

// remove deletes an IPAddress outright (it has no finalizers of its own).
func remove(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
	return cur, storage.DeleteRemove, nil
}

func parent(a *networkingv1.IPAddress) string {
	ref := a.Spec.ParentRef
	if ref == nil {
		return "none"
	}
	return fmt.Sprintf("%s.%s %s/%s", ref.Resource, ref.Group, ref.Namespace, ref.Name)
}
