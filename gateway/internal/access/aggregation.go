package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/rbacfeed"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// aggregationInterval is how often the gateway compares the aggregated
// ClusterRoles' stored rules with the rules they select.
const aggregationInterval = time.Second

// aggregator writes the rules of aggregated ClusterRoles into their
// stored objects, as kube-controller-manager's clusterrole-aggregation
// controller does, for clusters without one (kgate dev). The authorizer
// aggregates in memory either way; this makes `kubectl get clusterrole
// admin` show what admin grants. Every gateway may run it: a write is a
// compare-and-swap on the revision the gateway saw, and gateways that see
// the same roles compute the same rules.
type aggregator struct {
	rbac  *authz.RBAC
	feed  *rbacfeed.Feed
	reg   *registry.Registry
	store *storage.Store
	log   *slog.Logger
}

func (a aggregator) round(ctx context.Context) {
	if !a.feed.Synced() {
		return
	}
	for _, p := range a.rbac.PendingAggregations() {
		if err := a.write(ctx, p); err != nil && ctx.Err() == nil {
			a.log.Debug("cannot store aggregated rules", "clusterrole", p.Name, "err", err)
		}
	}
}

// write stores p's rules unless the role changed since the authorizer
// saw it (then the next round sees the change).
func (a aggregator) write(ctx context.Context, p authz.Aggregation) error {
	rv, err := strconv.ParseInt(p.ResourceVersion, 10, 64)
	if err != nil {
		return err
	}
	gvr := rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	res, ok := a.reg.Lookup(gvr)
	if !ok {
		return fmt.Errorf("%s is not registered", gvr)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = a.store.Update(ctx, res, "", p.Name, storage.Preconditions{ResourceVersion: rv}, func(cur runtime.Object) (runtime.Object, error) {
		cr, ok := cur.(*rbacv1.ClusterRole)
		if !ok || cr.AggregationRule == nil {
			return nil, errors.New("not an aggregated cluster role")
		}
		cr = cr.DeepCopy()
		cr.Rules = append([]rbacv1.PolicyRule(nil), p.Rules...)
		return cr, nil
	})
	if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	return err
}
