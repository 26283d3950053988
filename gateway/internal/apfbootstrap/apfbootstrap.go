// Package apfbootstrap keeps API Priority and Fairness's bootstrap
// configuration as kube-apiserver does: the mandatory FlowSchemas and
// PriorityLevelConfigurations (exempt, catch-all) always as upstream
// defines them, the suggested ones created when missing and updated
// while their apf.kubernetes.io/autoupdate-spec annotation says so, and
// bootstrap objects upstream no longer defines deleted. The objects are
// k8s.io/apiserver's (pkg/apis/flowcontrol/bootstrap) and the decisions
// k8s.io/kubernetes's own ensurer (pkg/registry/flowcontrol/ensurer),
// run here over kgate's store instead of a loopback client. One pass at
// start, then every minute, as upstream; run by the controllers' leader.
package apfbootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/ensurer"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// DefaultInterval is how often the configuration is checked after the
// first pass, kube-apiserver's period.
const DefaultInterval = time.Minute

// Store is what the ensurer needs of storage.Store.
type Store interface {
	Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error)
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
	Delete(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, decide storage.DeleteFunc) (runtime.Object, bool, error)
}

// Config configures an Ensurer.
type Config struct {
	Store    Store              // required
	Registry *registry.Registry // required; serves flowcontrol.apiserver.k8s.io/v1
	Logger   *slog.Logger       // required
	// Interval between passes after the first; default DefaultInterval.
	Interval time.Duration
}

// Ensurer keeps the bootstrap configuration.
type Ensurer struct {
	cfg Config
	fs  ensurer.ObjectOps[*flowcontrolv1.FlowSchema]
	plc ensurer.ObjectOps[*flowcontrolv1.PriorityLevelConfiguration]
}

// New checks cfg.
func New(cfg Config) (*Ensurer, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the APF bootstrap ensurer: Store, Registry and Logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	fsRes, ok1 := cfg.Registry.Lookup(flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas"))
	plcRes, ok2 := cfg.Registry.Lookup(flowcontrolv1.SchemeGroupVersion.WithResource("prioritylevelconfigurations"))
	if !ok1 || !ok2 {
		return nil, errors.New("cannot make the APF bootstrap ensurer: flowcontrol.apiserver.k8s.io/v1 is not served")
	}
	fs := &objects[*flowcontrolv1.FlowSchema]{store: cfg.Store, res: fsRes}
	plc := &objects[*flowcontrolv1.PriorityLevelConfiguration]{store: cfg.Store, res: plcRes}
	return &Ensurer{
		cfg: cfg,
		fs:  ensurer.NewFlowSchemaOps(fsClient{objects: fs}, fs),
		plc: ensurer.NewPriorityLevelConfigurationOps(plcClient{objects: plc}, plc),
	}, nil
}

// Run ensures the configuration now and then every Interval until ctx
// ends. A failed pass is logged and tried again at the next.
func (e *Ensurer) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.Interval)
	defer t.Stop()
	for {
		if err := e.Ensure(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("APF bootstrap configuration pass failed, trying again later", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Ensure makes one pass, in kube-apiserver's order: suggested, mandatory,
// then the removal of bootstrap objects no longer defined.
func (e *Ensurer) Ensure(ctx context.Context) error {
	if err := ensurer.EnsureConfigurations(ctx, e.plc, bootstrap.SuggestedPriorityLevelConfigurations, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()); err != nil {
		return fmt.Errorf("cannot ensure the suggested priority levels: %w", err)
	}
	if err := ensurer.EnsureConfigurations(ctx, e.fs, bootstrap.SuggestedFlowSchemas, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.FlowSchema]()); err != nil {
		return fmt.Errorf("cannot ensure the suggested flow schemas: %w", err)
	}
	if err := ensurer.EnsureConfigurations(ctx, e.plc, bootstrap.MandatoryPriorityLevelConfigurations, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()); err != nil {
		return fmt.Errorf("cannot ensure the mandatory priority levels: %w", err)
	}
	if err := ensurer.EnsureConfigurations(ctx, e.fs, bootstrap.MandatoryFlowSchemas, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.FlowSchema]()); err != nil {
		return fmt.Errorf("cannot ensure the mandatory flow schemas: %w", err)
	}
	if err := ensurer.RemoveUnwantedObjects(ctx, e.fs, append(append([]*flowcontrolv1.FlowSchema{}, bootstrap.MandatoryFlowSchemas...), bootstrap.SuggestedFlowSchemas...)); err != nil {
		return fmt.Errorf("cannot remove dangling flow schemas: %w", err)
	}
	if err := ensurer.RemoveUnwantedObjects(ctx, e.plc, append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, bootstrap.MandatoryPriorityLevelConfigurations...), bootstrap.SuggestedPriorityLevelConfigurations...)); err != nil {
		return fmt.Errorf("cannot remove dangling priority levels: %w", err)
	}
	return nil
}

// object is a FlowSchema or a PriorityLevelConfiguration.
type object interface {
	*flowcontrolv1.FlowSchema | *flowcontrolv1.PriorityLevelConfiguration
	metav1.Object
	runtime.Object
}

// objects is the ensurer's client and lister of one kind over the store:
// storage errors become the API errors the ensurer tells apart
// (NotFound, AlreadyExists, Conflict). The lister reads etcd, not an
// informer's cache.
type objects[T object] struct {
	store Store
	res   *registry.Resource
}

func (o *objects[T]) apiError(err error, name string) error {
	if err == nil {
		return nil
	}
	return apierror.StatusError(err, o.res.GVR().GroupResource(), name)
}

// readTimeout bounds the lister's reads, which the ensurer makes without
// a context.
const readTimeout = 30 * time.Second

func (o *objects[T]) Get(name string) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	obj, err := o.store.Get(ctx, o.res, "", name, 0)
	if err != nil {
		return nil, o.apiError(err, name)
	}
	return cast[T](obj)
}

func (o *objects[T]) List(sel labels.Selector) ([]T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var out []T
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := o.store.List(ctx, o.res, "", opts)
		if err != nil {
			return nil, o.apiError(err, "")
		}
		for _, obj := range page.Items {
			t, err := cast[T](obj)
			if err != nil {
				return nil, err
			}
			if sel.Matches(labels.Set(t.GetLabels())) {
				out = append(out, t)
			}
		}
		if page.Last == "" {
			return out, nil
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
}

func (o *objects[T]) create(ctx context.Context, obj T) (T, error) {
	got, err := o.store.Create(ctx, o.res, obj)
	if err != nil {
		return nil, o.apiError(err, obj.GetName())
	}
	return cast[T](got)
}

// update writes obj if it is still at the resourceVersion it carries, as
// an update through the API does.
func (o *objects[T]) update(ctx context.Context, obj T) (T, error) {
	var pre storage.Preconditions
	if rv := obj.GetResourceVersion(); rv != "" {
		var err error
		if pre.ResourceVersion, err = parseRV(rv); err != nil {
			return nil, err
		}
	}
	got, err := o.store.Update(ctx, o.res, "", obj.GetName(), pre, func(runtime.Object) (runtime.Object, error) {
		return obj.DeepCopyObject(), nil
	})
	if err != nil {
		return nil, o.apiError(err, obj.GetName())
	}
	return cast[T](got)
}

func (o *objects[T]) delete(ctx context.Context, name string) error {
	_, _, err := o.store.Delete(ctx, o.res, "", name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		return cur, storage.DeleteRemove, nil
	})
	return o.apiError(err, name)
}

func cast[T object](obj runtime.Object) (T, error) {
	t, ok := obj.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("cannot read %T: stored as %T", zero, obj)
	}
	return t, nil
}

func parseRV(rv string) (int64, error) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse resourceVersion %q: %w", rv, err)
	}
	return n, nil
}

// fsClient and plcClient are the typed clients the ensurer is given. It
// calls only Create, Update and Delete (ensurer.client); the embedded
// interface is nil, so any other method would panic rather than pretend.
type fsClient struct {
	flowcontrolclient.FlowSchemaInterface
	objects *objects[*flowcontrolv1.FlowSchema]
}

func (c fsClient) Create(ctx context.Context, fs *flowcontrolv1.FlowSchema, _ metav1.CreateOptions) (*flowcontrolv1.FlowSchema, error) {
	return c.objects.create(ctx, fs)
}

func (c fsClient) Update(ctx context.Context, fs *flowcontrolv1.FlowSchema, _ metav1.UpdateOptions) (*flowcontrolv1.FlowSchema, error) {
	return c.objects.update(ctx, fs)
}

func (c fsClient) Delete(ctx context.Context, name string, _ metav1.DeleteOptions) error {
	return c.objects.delete(ctx, name)
}

type plcClient struct {
	flowcontrolclient.PriorityLevelConfigurationInterface
	objects *objects[*flowcontrolv1.PriorityLevelConfiguration]
}

func (c plcClient) Create(ctx context.Context, plc *flowcontrolv1.PriorityLevelConfiguration, _ metav1.CreateOptions) (*flowcontrolv1.PriorityLevelConfiguration, error) {
	return c.objects.create(ctx, plc)
}

func (c plcClient) Update(ctx context.Context, plc *flowcontrolv1.PriorityLevelConfiguration, _ metav1.UpdateOptions) (*flowcontrolv1.PriorityLevelConfiguration, error) {
	return c.objects.update(ctx, plc)
}

func (c plcClient) Delete(ctx context.Context, name string, _ metav1.DeleteOptions) error {
	return c.objects.delete(ctx, name)
}
