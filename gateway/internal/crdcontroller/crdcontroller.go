// Package crdcontroller keeps the status of CustomResourceDefinitions as
// kube-apiserver's apiextensions controllers do: status.acceptedNames and
// the NamesAccepted condition (a name another CRD of the group has is not
// given: PluralConflict, KindConflict, ...), Established once the names
// are accepted, status.storedVersions, and on deletion the
// customresourcecleanup.apiextensions.k8s.io finalizer: the Terminating
// condition, every object of the CRD deleted as a client's delete would
// (upstream's crdFinalizer deletes each namespace's collection): an
// object with finalizers is marked (deletionTimestamp) and waited for
// until its controllers let it go, the others are removed; once none is
// left, the finalizer is removed, which removes the CRD. It must run in one member of the tier at a time
// (gateway/internal/leader); every write is a compare-and-swap on the
// CRD's resourceVersion, so a write based on a stale read fails instead of
// undoing a newer one.
//
// It follows the CRDs with an etcd watch on their prefix: each batch of
// changes triggers a pass over all of them (CRDs are few), and a failed
// watch a fresh list.
package crdcontroller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/follow"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/crds"
	"github.com/kgate/kgate/storage/registry"
)

// Store is what the controller needs of storage.Store.
type Store interface {
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
	Delete(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error)
}

// Deleter decides a delete as a client's delete is decided: upstream's
// rest.BeforeDelete and the registry's finalizer rules
// (builtin.Semantics).
type Deleter interface {
	Delete(ctx context.Context, res *registry.Resource, obj runtime.Object, opts *metav1.DeleteOptions) (runtime.Object, storage.DeleteAction, error)
}

// Etcd is what the controller needs of an etcd client: a watch on the
// CRDs' prefix and deletes of the custom resources' prefixes.
type Etcd interface {
	clientv3.Watcher
	clientv3.KV
}

// Config configures a Controller.
type Config struct {
	Store    Store
	Etcd     Etcd
	Registry *registry.Registry
	Deleter  Deleter
	Logger   *slog.Logger
	// Backoff is the pause after a failed pass or watch. Default 1s.
	Backoff time.Duration
}

// GVR is the resource the controller keeps.
var GVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Controller keeps the CRDs' status. Run runs it.
type Controller struct {
	cfg      Config
	res      *registry.Resource
	log      *slog.Logger
	builtins map[schema.GroupResource]bool // what a CRD must not delete the objects of
	waiting  bool                          // the last pass left objects of a deleted CRD waiting
}

// New checks cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Etcd == nil || cfg.Registry == nil || cfg.Deleter == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the CRD controller: Store, Etcd, Registry, Deleter and Logger are required")
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	res, ok := cfg.Registry.Lookup(GVR)
	if !ok {
		return nil, fmt.Errorf("cannot make the CRD controller: %s is not served", GVR)
	}
	c := &Controller{cfg: cfg, res: res, log: cfg.Logger.With("controller", "crd"), builtins: map[schema.GroupResource]bool{}}
	for _, r := range registry.Builtin() {
		c.builtins[r.GVR().GroupResource()] = true
	}
	return c, nil
}

// Run keeps the CRDs' status until ctx ends: a pass over every CRD,
// then another after each batch of changes etcd's watch reports.
func (c *Controller) Run(ctx context.Context) {
	follow.Run(ctx, follow.Config{
		Name: "CRD controller", Etcd: c.cfg.Etcd, Backoff: c.cfg.Backoff, Logger: c.log,
		Prefixes: []follow.Prefix{{Key: c.res.ListPrefix("")}},
	}, func(ctx context.Context) (int64, time.Duration, error) {
		rev, err := c.Sync(ctx)
		var next time.Duration
		if c.waiting {
			// Objects of a deleted CRD wait for their finalizers: look
			// again, as upstream's finalizer requeues.
			next = recheckInstances
		}
		return rev, next, err
	})
}

// recheckInstances is how soon a deleted CRD whose objects still have
// finalizers is looked at again.
const recheckInstances = 5 * time.Second

// Sync reads every CRD and brings each one's status up to date, the
// oldest first (of two CRDs asking for one name, the older gets it). It
// returns the revision of the read.
func (c *Controller) Sync(ctx context.Context) (int64, error) {
	crds, rev, err := c.list(ctx)
	if err != nil {
		return 0, err
	}
	slices.SortFunc(crds, func(a, b *apiextensionsv1.CustomResourceDefinition) int {
		if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return cmp.Compare(a.Name, b.Name)
	})
	c.waiting = false
	var errs []error
	for i, crd := range crds {
		out, err := c.sync(ctx, crd, crds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if out != nil {
			// What this pass wrote is what the next CRDs of the pass
			// see (upstream's mutation cache).
			crds[i] = out
		}
	}
	return rev, errors.Join(errs...)
}

// list reads every CRD at one revision.
func (c *Controller) list(ctx context.Context) ([]*apiextensionsv1.CustomResourceDefinition, int64, error) {
	return storage.ListAll[*apiextensionsv1.CustomResourceDefinition](ctx, c.cfg.Store, c.res, "")
}

// sync brings one CRD's status up to date and returns it as written, or
// nil when nothing was written.
func (c *Controller) sync(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, all []*apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	if crd.DeletionTimestamp != nil {
		if !apiextensionshelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
			return nil, nil
		}
		return c.finalize(ctx, crd)
	}
	next := crd.DeepCopy()
	changed := storedVersion(next)
	changed = name(next, all) || changed
	// Upstream establishes in a second controller, after the naming
	// condition has been written; one write carries both here only
	// when the names were accepted before.
	if !changed {
		changed = establish(next)
	}
	if !changed {
		return nil, nil
	}
	return c.write(ctx, crd, next)
}

// finalize is upstream's CRD finalizer: Terminating while the objects are
// deleted, then the finalizer removed (which removes the CRD).
func (c *Controller) finalize(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	next := crd.DeepCopy()
	apiextensionshelpers.SetCRDCondition(next, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress",
	})
	if !equality.Semantic.DeepEqual(crd.Status, next.Status) {
		out, err := c.write(ctx, crd, next)
		if err != nil || out == nil {
			return out, err
		}
		crd, next = out, out.DeepCopy()
	}
	gr := schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Status.AcceptedNames.Plural}
	switch {
	case c.builtins[gr]:
		apiextensionshelpers.SetCRDCondition(next, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse,
			Reason: "OverlappingBuiltInResource", Message: "instances overlap with built-in resources in storage",
		})
	case apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established):
		cond, remain, err := c.deleteInstances(ctx, crd, gr)
		apiextensionshelpers.SetCRDCondition(next, cond)
		if err != nil || remain {
			if _, werr := c.write(ctx, crd, next); werr != nil {
				c.log.Warn("cannot record the cleanup's progress", "crd", crd.Name, "err", werr)
			}
			c.waiting = c.waiting || remain
			return nil, err
		}
	default:
		apiextensionshelpers.SetCRDCondition(next, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse,
			Reason: "NeverEstablished", Message: "resource was never established",
		})
	}
	apiextensionshelpers.CRDRemoveFinalizer(next, apiextensionsv1.CustomResourceCleanupFinalizer)
	return c.write(ctx, crd, next)
}

// deleteInstances deletes every object of the custom resource, in every
// namespace, each as a client's delete of it would (Deleter: an object
// with finalizers is only marked), and returns the Terminating condition
// to record and whether objects remain (waiting for their finalizers), as
// upstream's crdFinalizer. Objects the registry cannot read (no served
// resource for the CRD's storage version) go by their etcd prefix.
func (c *Controller) deleteInstances(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, gr schema.GroupResource) (apiextensionsv1.CustomResourceDefinitionCondition, bool, error) {
	failed := func(err error) (apiextensionsv1.CustomResourceDefinitionCondition, bool, error) {
		return apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
			Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not issue all deletes: %v", err),
		}, false, fmt.Errorf("cannot delete the objects of %s: %w", gr, err)
	}
	res, ok := c.cfg.Registry.Lookup(gr.WithVersion(crds.StorageVersion(crd)))
	if !ok {
		prefix := "/registry/" + gr.Group + "/" + gr.Resource + "/"
		resp, err := c.cfg.Etcd.Delete(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return failed(err)
		}
		c.log.Info("deleted the objects of a deleted CRD by prefix", "resource", gr.String(), "objects", resp.Deleted)
		return deletionCompleted(), false, nil
	}
	// By their keys, not their metadata: an object is deleted where it
	// is stored.
	prefix := res.ListPrefix("")
	resp, err := c.cfg.Etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return failed(err)
	}
	remain, removed := 0, 0
	for _, kv := range resp.Kvs {
		ns, name := "", strings.TrimPrefix(string(kv.Key), prefix)
		if res.Namespaced {
			ns, name, _ = strings.Cut(name, "/")
		}
		_, deleted, err := c.cfg.Store.Delete(ctx, res, ns, name, storage.Preconditions{},
			func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
				return c.cfg.Deleter.Delete(ctx, res, cur, &metav1.DeleteOptions{})
			})
		if errors.Is(err, storage.ErrInvalidObject) {
			// Not an object storage can read (nor one with finalizers
			// anyone could remove): it goes as it is, if unchanged.
			txn, terr := c.cfg.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(string(kv.Key))).Commit()
			if terr != nil {
				return failed(terr)
			}
			deleted, err = txn.Succeeded, nil
			if !txn.Succeeded {
				remain++ // changed meanwhile: the next pass sees it
				continue
			}
		}
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return failed(err)
		case deleted:
			removed++
		default:
			remain++
		}
	}
	c.log.Info("deleted the objects of a deleted CRD", "resource", gr.String(), "removed", removed, "waiting for finalizers", remain)
	if remain > 0 {
		return apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
			Reason:  "InstanceDeletionCheck",
			Message: fmt.Sprintf("could not confirm zero CustomResources remaining: %d waiting for their finalizers", remain),
		}, true, nil
	}
	return deletionCompleted(), false, nil
}

func deletionCompleted() apiextensionsv1.CustomResourceDefinitionCondition {
	return apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse,
		Reason: "InstanceDeletionCompleted", Message: "removed all instances",
	}
}

// write stores next in place of cur if cur is still the stored state
// (compare-and-swap on its resourceVersion). A CRD changed or deleted
// meanwhile is not an error: the watch brings the new state for the next
// pass. It returns what was stored, nil when nothing was.
func (c *Controller) write(ctx context.Context, cur, next *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	var rv int64
	if _, err := fmt.Sscan(cur.ResourceVersion, &rv); err != nil {
		return nil, fmt.Errorf("cannot update CRD %s: bad resourceVersion %q", cur.Name, cur.ResourceVersion)
	}
	obj, err := c.cfg.Store.Update(ctx, c.res, "", cur.Name, storage.Preconditions{ResourceVersion: rv, UID: string(cur.UID)},
		func(runtime.Object) (runtime.Object, error) { return next.DeepCopy(), nil })
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
		c.log.Debug("CRD changed while updating its status; the next pass sees it", "crd", cur.Name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot update CRD %s: %w", cur.Name, err)
	}
	out, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil, fmt.Errorf("cannot update CRD %s: stored as %T", cur.Name, obj)
	}
	if out.DeletionTimestamp != nil && len(out.Finalizers) == 0 {
		c.log.Info("CRD removed after cleanup", "crd", cur.Name)
	} else {
		c.log.Debug("CRD status updated", "crd", cur.Name, "accepted", out.Status.AcceptedNames.Plural)
	}
	return out, nil
}
