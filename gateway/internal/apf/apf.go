// Package apf is API Priority and Fairness as kube-apiserver runs it:
// the FlowSchemas and PriorityLevelConfigurations stored in the cluster
// classify each request, give each priority level its share of the
// gateway's seats and queue what is over them, by k8s.io/apiserver's own
// controller (pkg/util/flowcontrol) and work estimator. kgate gives it
// informers filled by a gateway feed (feedinformers) and writes the
// controller's status (the Dangling condition of a FlowSchema) through
// kgate's store and field manager, as the controller's server-side apply
// would. The apiserver_flowcontrol_* metrics are upstream's
// (Gatherer).
package apf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	apistorage "k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/feedinformers"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// Config configures a Controller.
type Config struct {
	// ConcurrencyLimit is the gateway's seats, shared by the priority
	// levels by their nominal concurrency shares (kube-apiserver's
	// --max-requests-inflight + --max-mutating-requests-inflight);
	// required.
	ConcurrencyLimit int
}

// Deps are what the controller reads and writes through.
type Deps struct {
	Registry  *registry.Registry
	Ranges    ranges.Source
	Cache     feed.Lister
	Hub       feed.Watcher
	Revisions feed.Revisions
	Codec     *codec.Codec
	// Store and Fields write the FlowSchemas' status; required.
	Store  Store
	Fields Fields
	Logger *slog.Logger
}

// Controller classifies and seats requests.
type Controller struct {
	log      *slog.Logger
	ctl      utilflowcontrol.Interface
	estimate fcrequest.WorkEstimatorFunc
	dropped  utilflowcontrol.DroppedRequestsTracker
	feed     source

	mu   sync.Mutex // guards stop
	stop func()
}

// source fills the informers (feed.Feed).
type source interface {
	Start()
	Close() error
}

var (
	fsGVR  = flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas")
	plcGVR = flowcontrolv1.SchemeGroupVersion.WithResource("prioritylevelconfigurations")
)

// New builds the controller over a feed of the configuration objects.
// Until the feed has listed them every request is classified by the
// mandatory configuration alone (exempt, catch-all), as upstream's is.
func New(cfg Config, d Deps) (*Controller, error) {
	if cfg.ConcurrencyLimit <= 0 {
		return nil, errors.New("cannot make API Priority and Fairness: the concurrency limit must be positive")
	}
	if d.Registry == nil || d.Store == nil || d.Fields == nil || d.Logger == nil {
		return nil, errors.New("cannot make API Priority and Fairness: Registry, Store, Fields and Logger are required")
	}
	fsRes, ok := d.Registry.Lookup(fsGVR)
	if _, ok2 := d.Registry.Lookup(plcGVR); !ok || !ok2 {
		return nil, errors.New("cannot make API Priority and Fairness: flowcontrol.apiserver.k8s.io/v1 is not served")
	}
	c, sinks, err := newController(cfg, d.Logger, statusClient{s: &statusWriter{store: d.Store, fields: d.Fields, res: fsRes}})
	if err != nil {
		return nil, err
	}
	if c.feed, err = feed.New(feed.Config{
		Registry: d.Registry, Ranges: d.Ranges, Cache: d.Cache, Hub: d.Hub, Revisions: d.Revisions,
		Codec: d.Codec, Sinks: sinks, Logger: d.Logger,
	}); err != nil {
		return nil, fmt.Errorf("cannot make API Priority and Fairness: %w", err)
	}
	return c, nil
}

// newController builds upstream's controller over informers the
// returned sinks fill; c.feed is the caller's to set.
func newController(cfg Config, log *slog.Logger, client flowcontrolclient.FlowcontrolV1Interface) (*Controller, map[schema.GroupVersionResource]feed.Sink, error) {
	fcmetrics.Register()
	factory := feedinformers.NewFactory(func(obj runtime.Object) (schema.GroupVersionResource, error) {
		switch obj.(type) {
		case *flowcontrolv1.FlowSchema:
			return fsGVR, nil
		case *flowcontrolv1.PriorityLevelConfiguration:
			return plcGVR, nil
		}
		return schema.GroupVersionResource{}, fmt.Errorf("no informer for %T", obj)
	})
	ctl := utilflowcontrol.New(factory, client, cfg.ConcurrencyLimit)
	sinks, err := factory.Sinks()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot make API Priority and Fairness: %w", err)
	}
	return &Controller{
		log: log, ctl: ctl, dropped: utilflowcontrol.NewDroppedRequestsTracker(),
		// Object counts are the cache nodes', not the gateway's: a LIST
		// costs the gateway the minimum, as an aggregated one does
		// upstream.
		estimate: fcrequest.NewWorkEstimator(noStats, ctl.GetInterestedWatchCount, fcrequest.DefaultWorkEstimatorConfig(), ctl.GetMaxSeats),
	}, sinks, nil
}

func noStats(string) (apistorage.Stats, error) {
	return apistorage.Stats{}, fcrequest.ObjectCountNotFoundErr
}

// Start starts the feed and upstream's controller; Close stops them.
func (c *Controller) Start() {
	c.feed.Start()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.ctl.Run(stop); err != nil {
			c.log.Error("API Priority and Fairness controller stopped", "err", err)
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stop = func() {
		close(stop)
		wg.Wait()
	}
}

// Close stops what Start started; without Start, or twice, it only
// closes the feed.
func (c *Controller) Close() {
	c.mu.Lock()
	stop := c.stop
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	_ = c.feed.Close()
}

// Request is what classification looks at.
type Request struct {
	Info *requestinfo.Info
	User user.Info
	// Query is the request's query string (the work estimate of a LIST
	// reads its limit and resourceVersion).
	Query string
	// Queued, if set, is called when the request is put in a queue
	// (under the queues' lock: it must not block).
	Queued func()
}

// Decision is how a request was classified and whether it ran.
type Decision struct {
	// FlowSchemaUID and PriorityLevelUID are the objects that classified
	// the request, for kube-apiserver's X-Kubernetes-PF-* headers.
	FlowSchemaUID, PriorityLevelUID types.UID
	// PriorityLevel is the level's name.
	PriorityLevel string
	// Executed is false when the request was rejected: its queue was
	// full, its wait ran out or ctx ended while it waited.
	Executed bool
	// RetryAfter is the seconds a rejected request is told to wait.
	RetryAfter int
}

// Handle classifies r, waits for its seats until ctx ends (its deadline
// bounds the wait, as the request's wait context upstream) and runs exec
// on them; exec does not run when the request is rejected. Exempt
// requests run at once.
func (c *Controller) Handle(ctx context.Context, r Request, exec func()) Decision {
	info := toUpstream(r.Info)
	var d Decision
	note := func(fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration, _ string) {
		d.FlowSchemaUID, d.PriorityLevelUID, d.PriorityLevel = fs.UID, pl.UID, pl.Name
	}
	estimate := func() fcrequest.WorkEstimate {
		hr := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: r.Info.Path, RawQuery: r.Query}}
		hr = hr.WithContext(apirequest.WithRequestInfo(context.Background(), info))
		return c.estimate(hr, "", d.PriorityLevel)
	}
	c.ctl.Handle(ctx, utilflowcontrol.RequestDigest{RequestInfo: info, User: r.User}, note, estimate, func(inQueue bool) {
		if inQueue && r.Queued != nil {
			r.Queued()
		}
	}, func() {
		d.Executed = true
		exec()
	})
	if !d.Executed {
		c.dropped.RecordDroppedRequest(d.PriorityLevel)
		d.RetryAfter = int(c.dropped.GetRetryAfter(d.PriorityLevel))
	}
	return d
}

// toUpstream is the apiserver's RequestInfo of a kgate one.
func toUpstream(i *requestinfo.Info) *apirequest.RequestInfo {
	return &apirequest.RequestInfo{
		IsResourceRequest: i.IsResourceRequest, Path: i.Path, Verb: i.Verb, APIPrefix: i.APIPrefix,
		APIGroup: i.APIGroup, APIVersion: i.APIVersion, Namespace: i.Namespace, Resource: i.Resource,
		Subresource: i.Subresource, Name: i.Name, Parts: i.Parts,
	}
}

// LongRunning reports whether a request streams for long and so is
// not seated at all (upstream's long-running check, watches excepted:
// they hold seats while they start).
func LongRunning(i *requestinfo.Info) bool {
	if i.Verb == "proxy" {
		return true
	}
	switch i.Subresource {
	case "log", "exec", "attach", "portforward", "proxy":
		return true
	}
	return false
}

// Gatherer gathers upstream's API Priority and Fairness metrics
// (apiserver_flowcontrol_*), which k8s.io/apiserver registers with the
// process's legacy registry: one set per process, whatever the number of
// gateways in it.
func Gatherer() prometheus.Gatherer { return gatherer{} }

type gatherer struct{}

func (gatherer) Gather() ([]*dto.MetricFamily, error) {
	all, err := legacyregistry.DefaultGatherer.Gather()
	out := all[:0]
	for _, mf := range all {
		if strings.HasPrefix(mf.GetName(), "apiserver_flowcontrol_") {
			out = append(out, mf)
		}
	}
	return out, err
}
