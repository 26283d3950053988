// Package autoregister keeps the local APIServices of the tier, as
// kube-apiserver's own controllers do: one APIService per built-in
// group/version kgate serves (the autoregister controller's "onstart"
// ones, named <version>.<group>, priorities from kube-apiserver's table,
// spec.service nil), one per served version of a CRD group (the
// crdregistration controller's continuously managed ones, priority
// 1000/100, deleted when no CRD serves that group/version any more), and
// the Available condition of every local APIService (kube-aggregator's
// local availability controller: True, reason Local).
//
// It must run in one member of the tier at a time
// (gateway/internal/controllers); every write is a compare-and-swap on
// the APIService's resourceVersion. It follows (gateway/internal/follow)
// the registry (built-ins and established CRDs) through Registry.Changed
// and the stored APIServices through an etcd watch on their prefix; each
// change triggers a pass over all of them (APIServices are few).
package autoregister

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	"github.com/kgate/kgate/gateway/internal/follow"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Store is what the controller needs of storage.Store.
type Store interface {
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
	Delete(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error)
}

// Config configures a Controller.
type Config struct {
	Store    Store
	Etcd     clientv3.Watcher
	Registry *registry.Registry
	Logger   *slog.Logger
	// Backoff is the pause after a failed pass or watch. Default 1s.
	Backoff time.Duration
}

// GVR is the resource the controller keeps.
var GVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// managedLabel and its values, as upstream's autoregister controller
// (k8s.io/kube-aggregator/pkg/controllers/autoregister, not linked for one
// constant: it brings client-go's informers) sets them.
const (
	managedLabel       = "kube-aggregator.kubernetes.io/automanaged"
	manageOnStart      = "onstart"
	manageContinuously = "true"
)

// Controller keeps the local APIServices. Run runs it.
type Controller struct {
	cfg Config
	res *registry.Resource
	log *slog.Logger
}

// New checks cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Etcd == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the APIService autoregister controller: Store, Etcd, Registry and Logger are required")
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	res, ok := cfg.Registry.Lookup(GVR)
	if !ok {
		return nil, fmt.Errorf("cannot make the APIService autoregister controller: %s is not served", GVR)
	}
	return &Controller{cfg: cfg, res: res, log: cfg.Logger.With("controller", "apiservice-autoregister")}, nil
}

// Run keeps the local APIServices until ctx ends: a pass, then another
// after each registry change or batch of APIService changes. The
// "onstart" ones are brought to their desired spec once per Run, as
// upstream does once per kube-apiserver start: here once each time this
// member starts leading.
func (c *Controller) Run(ctx context.Context) {
	synced := map[string]bool{}
	follow.Run(ctx, follow.Config{
		Name: "APIService autoregister", Etcd: c.cfg.Etcd, Backoff: c.cfg.Backoff, Logger: c.log,
		Prefixes: []follow.Prefix{{Key: c.res.ListPrefix("")}},
		Changed:  c.cfg.Registry.Changed,
	}, func(ctx context.Context) (int64, time.Duration, error) {
		rev, err := c.sync(ctx, synced)
		return rev, 0, err
	})
}

// Sync makes one pass with nothing synced before (a fresh start) and
// returns the revision of its read; for tests.
func (c *Controller) Sync(ctx context.Context) (int64, error) {
	return c.sync(ctx, map[string]bool{})
}

// sync brings the stored APIServices to the desired local ones and sets
// the Available condition of every local one. synced records the
// "onstart" APIServices already brought to their spec in this Run.
func (c *Controller) sync(ctx context.Context, synced map[string]bool) (int64, error) {
	want := Desired(c.cfg.Registry.Snapshot())
	have, rev, err := c.list(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	for name, d := range want {
		cur, ok := have[name]
		switch {
		case !ok:
			// Upstream creates an "onstart" one only while its
			// first sync is pending; kgate creates a missing one on
			// every pass, so a deleted built-in APIService comes back
			// without a restart of the tier.
			if err := c.create(ctx, d); err != nil {
				errs = append(errs, err)
				continue
			}
			synced[name] = true
		case d.Labels[managedLabel] == manageOnStart && synced[name]:
		case !managed(cur):
			// Not ours (someone replaced it): left alone, as upstream.
			synced[name] = true
		default:
			if !equality.Semantic.DeepEqual(cur.Spec, d.Spec) {
				next := cur.DeepCopy()
				next.Spec = d.Spec
				if err := c.write(ctx, cur, next); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			synced[name] = true
		}
	}
	for name, cur := range have {
		if _, ok := want[name]; ok {
			continue
		}
		// A continuously managed one nobody wants any more (a CRD
		// group/version gone): deleted, as upstream's 5A/6A case.
		if cur.Labels[managedLabel] != manageContinuously {
			continue
		}
		if err := c.delete(ctx, cur); err != nil {
			errs = append(errs, err)
		}
	}
	// Local availability: read again, so that the condition goes on
	// what the pass wrote.
	if len(errs) == 0 {
		have, rev, err = c.list(ctx)
		if err != nil {
			return 0, err
		}
		for _, cur := range have {
			if cur.Spec.Service != nil {
				continue
			}
			next := cur.DeepCopy()
			helper.SetAPIServiceCondition(next, helper.NewLocalAvailableAPIServiceCondition())
			if equality.Semantic.DeepEqual(cur.Status, next.Status) {
				continue
			}
			if err := c.write(ctx, cur, next); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return rev, errors.Join(errs...)
}

// Desired returns the local APIServices the served resources of snap
// call for, by name: a built-in group/version in kube-apiserver's
// priority table as upstream's autoregister ("onstart"), a group/version
// served by a CRD as upstream's crdregistration ("true").
func Desired(snap *registry.Snapshot) map[string]*apiregistrationv1.APIService {
	out := map[string]*apiregistrationv1.APIService{}
	for _, r := range snap.Resources() {
		gv := schema.GroupVersion{Group: r.Group, Version: r.Version}
		name := gv.Version + "." + gv.Group
		if _, ok := out[name]; ok {
			continue
		}
		p, manage := crdPriority, manageContinuously
		if !r.Unstructured() {
			var known bool
			if p, known = builtinPriorities[gv]; !known {
				continue
			}
			manage = manageOnStart
		}
		out[name] = &apiregistrationv1.APIService{
			TypeMeta: metav1.TypeMeta{APIVersion: GVR.GroupVersion().String(), Kind: "APIService"},
			ObjectMeta: metav1.ObjectMeta{
				Name:   name,
				Labels: map[string]string{managedLabel: manage},
			},
			Spec: apiregistrationv1.APIServiceSpec{
				Group: gv.Group, Version: gv.Version,
				GroupPriorityMinimum: p.group, VersionPriority: p.version,
			},
		}
	}
	return out
}

// managed reports whether upstream's autoregister controller would
// manage the stored APIService (it carries the label).
func managed(s *apiregistrationv1.APIService) bool {
	return s.Labels[managedLabel] != ""
}

// list reads every APIService at one revision.
func (c *Controller) list(ctx context.Context) (map[string]*apiregistrationv1.APIService, int64, error) {
	all, rev, err := storage.ListAll[*apiregistrationv1.APIService](ctx, c.cfg.Store, c.res, "")
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]*apiregistrationv1.APIService, len(all))
	for _, s := range all {
		out[s.Name] = s
	}
	return out, rev, nil
}

// create stores a desired APIService; one created meanwhile is no error.
func (c *Controller) create(ctx context.Context, d *apiregistrationv1.APIService) error {
	_, err := c.cfg.Store.Create(ctx, c.res, d.DeepCopy())
	if errors.Is(err, storage.ErrAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot create APIService %s: %w", d.Name, err)
	}
	c.log.Info("APIService registered", "apiservice", d.Name)
	return nil
}

// write stores next in place of cur if cur is still the stored state. A
// change or delete meanwhile is no error: the watch brings it.
func (c *Controller) write(ctx context.Context, cur, next *apiregistrationv1.APIService) error {
	pre, err := preconditions(cur)
	if err != nil {
		return err
	}
	_, err = c.cfg.Store.Update(ctx, c.res, "", cur.Name, pre,
		func(runtime.Object) (runtime.Object, error) { return next.DeepCopy(), nil })
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot update APIService %s: %w", cur.Name, err)
	}
	return nil
}

// delete removes cur if it is still the stored state.
func (c *Controller) delete(ctx context.Context, cur *apiregistrationv1.APIService) error {
	pre, err := preconditions(cur)
	if err != nil {
		return err
	}
	_, _, err = c.cfg.Store.Delete(ctx, c.res, "", cur.Name, pre,
		func(runtime.Object) (runtime.Object, storage.DeleteAction, error) {
			return nil, storage.DeleteRemove, nil
		})
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot delete APIService %s: %w", cur.Name, err)
	}
	c.log.Info("APIService unregistered", "apiservice", cur.Name)
	return nil
}

func preconditions(s *apiregistrationv1.APIService) (storage.Preconditions, error) {
	rv, err := strconv.ParseInt(s.ResourceVersion, 10, 64)
	if err != nil {
		return storage.Preconditions{}, fmt.Errorf("cannot write APIService %s: bad resourceVersion %q", s.Name, s.ResourceVersion)
	}
	return storage.Preconditions{ResourceVersion: rv, UID: string(s.UID)}, nil
}
