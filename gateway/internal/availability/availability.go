// Package availability keeps the Available condition of the APIServices
// served by extension API servers (spec.service set), as
// kube-aggregator's remote availability controller does, with its
// checks, reasons and messages: the Service must exist (ServiceNotFound),
// a ClusterIP Service must have the APIService's port
// (ServicePortError) and a ready endpoint for it in its EndpointSlices
// (EndpointsNotFound, MissingEndpoints), and one of five discovery
// requests to the backend (GET /apis/<group>/<version> as
// system:kube-aggregator in system:masters, through the front-proxy
// client certificate, answered within 5s with a 2xx or 3xx) must succeed
// (FailedDiscoveryCheck); else Passed. The local APIServices' condition
// is gateway/internal/autoregister's.
//
// It runs in one member of the tier at a time
// (gateway/internal/controllers). It follows (gateway/internal/follow)
// the APIServices, and the Services and EndpointSlices of the namespaces
// their services are in, through etcd watches; it checks every
// APIService again every Resync (upstream's 30s resync), and sooner,
// backing off from 1s, while one is not Available. It keeps upstream's
// metrics aggregator_unavailable_apiservice (a gauge by name) and
// aggregator_unavailable_apiservice_total (by name and reason).
package availability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	"github.com/kgate/kgate/gateway/internal/aggregator"
	"github.com/kgate/kgate/gateway/internal/follow"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Store is what the controller needs of storage.Store.
type Store interface {
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
}

// Backends reads an APIService's Service and EndpointSlices and resolves
// where its requests go (aggregator.Resolver, the proxy's own).
type Backends interface {
	Service(ctx context.Context, ns, name string) (*corev1.Service, error)
	EndpointSlices(ctx context.Context, ns, name string) ([]*discoveryv1.EndpointSlice, error)
	Resolve(ctx context.Context, ref *apiregistrationv1.ServiceReference) (*url.URL, error)
}

// Config configures a Controller.
type Config struct {
	Store    Store
	Etcd     clientv3.Watcher
	Registry *registry.Registry
	Backends Backends
	// CertPEM, KeyPEM are the front-proxy client certificate the
	// discovery check presents (--proxy-client-cert-file); none: none.
	CertPEM, KeyPEM []byte
	// Dial dials the backends; default a net.Dialer.
	Dial aggregator.DialFunc
	// Resync checks every APIService at least this often; default 30s.
	Resync time.Duration
	// Timeout bounds one discovery request; default 5s.
	Timeout time.Duration
	// Backoff is the pause after a failed pass; default 1s.
	Backoff time.Duration
	Logger  *slog.Logger
	Metrics prometheus.Registerer
}

// attempts is how many discovery requests one check makes at once; one
// success is enough (upstream's number).
const attempts = 5

// parallel bounds the APIServices checked at once.
const parallel = 8

var (
	apiServicesGVR = apiregistrationv1.SchemeGroupVersion.WithResource("apiservices")
	servicesGVR    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	slicesGVR      = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

// errSpecChanged stops a status write whose check went on an older spec.
var errSpecChanged = errors.New("the APIService changed since its check")

// Controller keeps the Available condition of remote APIServices.
type Controller struct {
	cfg                   Config
	res, services, slices *registry.Resource // slices nil when not served
	log                   *slog.Logger

	unavailable      *prometheus.GaugeVec
	unavailableTotal *prometheus.CounterVec

	// Between passes, in Run's goroutine only:
	namespaces map[string]bool // of the remote APIServices' services
	retry      time.Duration   // the next pass's delay while one is unavailable
	named      map[string]bool // APIServices in the gauge
}

// New checks cfg and registers the metrics.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Etcd == nil || cfg.Registry == nil || cfg.Backends == nil || cfg.Logger == nil || cfg.Metrics == nil {
		return nil, errors.New("cannot make the APIService availability controller: Store, Etcd, Registry, Backends, Logger and Metrics are required")
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	c := &Controller{cfg: cfg, log: cfg.Logger, named: map[string]bool{}}
	var ok bool
	if c.res, ok = cfg.Registry.Lookup(apiServicesGVR); !ok {
		return nil, fmt.Errorf("cannot make the APIService availability controller: %s is not served", apiServicesGVR)
	}
	if c.services, ok = cfg.Registry.Lookup(servicesGVR); !ok {
		return nil, fmt.Errorf("cannot make the APIService availability controller: %s is not served", servicesGVR)
	}
	c.slices, _ = cfg.Registry.Lookup(slicesGVR)
	c.unavailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "aggregator_unavailable_apiservice",
		Help: "Gauge of APIServices which are marked as unavailable broken down by APIService name (set by the member running the cluster-wide controllers).",
	}, []string{"name"})
	c.unavailableTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aggregator_unavailable_apiservice_total",
		Help: "Counter of APIServices which are marked as unavailable broken down by APIService name and reason.",
	}, []string{"name", "reason"})
	for _, m := range []prometheus.Collector{c.unavailable, c.unavailableTotal} {
		if err := cfg.Metrics.Register(m); err != nil {
			return nil, fmt.Errorf("cannot make the APIService availability controller: %w", err)
		}
	}
	return c, nil
}

// Run keeps the condition until ctx ends (this member stops leading);
// then the gauge is emptied, as another member now keeps it.
func (c *Controller) Run(ctx context.Context) {
	defer func() {
		c.unavailable.Reset()
		clear(c.named)
	}()
	prefixes := []follow.Prefix{
		{Key: c.res.ListPrefix("")},
		{Key: c.services.ListPrefix(""), KeysOnly: true, Match: c.concerns(c.services)},
	}
	if c.slices != nil {
		prefixes = append(prefixes, follow.Prefix{Key: c.slices.ListPrefix(""), KeysOnly: true, Match: c.concerns(c.slices)})
	}
	follow.Run(ctx, follow.Config{
		Name: "APIService availability", Etcd: c.cfg.Etcd, Prefixes: prefixes,
		Resync: c.cfg.Resync, Backoff: c.cfg.Backoff, Logger: c.log,
	}, c.pass)
}

// concerns returns whether a key of res is in a namespace of a remote
// APIService's service.
func (c *Controller) concerns(res *registry.Resource) func(key string) bool {
	return func(key string) bool {
		for ns := range c.namespaces {
			if strings.HasPrefix(key, res.ListPrefix(ns)) {
				return true
			}
		}
		return false
	}
}

// Pass checks every APIService once; for tests.
func (c *Controller) Pass(ctx context.Context) error {
	_, _, err := c.pass(ctx)
	return err
}

// pass checks every remote APIService, writes the conditions that
// changed and sets the metrics.
func (c *Controller) pass(ctx context.Context) (int64, time.Duration, error) {
	all, rev, err := storage.ListAll[*apiregistrationv1.APIService](ctx, c.cfg.Store, c.res, "")
	if err != nil {
		return 0, 0, err
	}
	conds := make([]apiregistrationv1.APIServiceCondition, len(all))
	namespaces := map[string]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i, s := range all {
		if s.Spec.Service == nil {
			continue
		}
		namespaces[s.Spec.Service.Namespace] = true
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			conds[i] = c.check(ctx, s)
		})
	}
	wg.Wait()
	c.namespaces = namespaces

	var errs []error
	seen := map[string]bool{}
	allAvailable := true
	for i, s := range all {
		seen[s.Name] = true
		now := s
		if s.Spec.Service != nil {
			if now, err = c.write(ctx, s, conds[i]); err != nil {
				errs = append(errs, err)
				now = s
			}
		}
		available := helper.IsAPIServiceConditionTrue(now, apiregistrationv1.Available)
		if s.Spec.Service != nil && !available {
			allAvailable = false
		}
		c.count(s, now)
	}
	for name := range c.named {
		if !seen[name] {
			c.unavailable.DeleteLabelValues(name)
			delete(c.named, name)
		}
	}
	if allAvailable {
		c.retry = 0
	} else {
		c.retry = min(max(2*c.retry, time.Second), c.cfg.Resync)
	}
	return rev, c.retry, errors.Join(errs...)
}

// count sets the metrics of one APIService from its stored state before
// (was) and after (now) the pass, as upstream's.
func (c *Controller) count(was, now *apiregistrationv1.APIService) {
	c.named[now.Name] = true
	isAvailable := helper.IsAPIServiceConditionTrue(now, apiregistrationv1.Available)
	if isAvailable {
		c.unavailable.WithLabelValues(now.Name).Set(0)
	} else {
		c.unavailable.WithLabelValues(now.Name).Set(1)
	}
	if was != now && helper.IsAPIServiceConditionTrue(was, apiregistrationv1.Available) != isAvailable && !isAvailable {
		reason := "UnknownReason"
		if cond := helper.GetAPIServiceConditionByType(now, apiregistrationv1.Available); cond != nil {
			reason = cond.Reason
		}
		c.unavailableTotal.WithLabelValues(now.Name, reason).Inc()
	}
}

// write stores cond on the APIService when it changes its status and the
// spec is still the one checked; it returns the state stored after.
func (c *Controller) write(ctx context.Context, s *apiregistrationv1.APIService, cond apiregistrationv1.APIServiceCondition) (*apiregistrationv1.APIService, error) {
	next := s.DeepCopy()
	helper.SetAPIServiceCondition(next, cond)
	if equality.Semantic.DeepEqual(s.Status, next.Status) {
		return s, nil
	}
	obj, err := c.cfg.Store.Update(ctx, c.res, "", s.Name, storage.Preconditions{UID: string(s.UID)},
		func(obj runtime.Object) (runtime.Object, error) {
			cur, ok := obj.(*apiregistrationv1.APIService)
			if !ok {
				return nil, fmt.Errorf("stored as %T", obj)
			}
			if !equality.Semantic.DeepEqual(cur.Spec, s.Spec) {
				return nil, errSpecChanged
			}
			out := cur.DeepCopy()
			out.ResourceVersion = ""
			helper.SetAPIServiceCondition(out, cond)
			return out, nil
		})
	// A change or delete meanwhile is no error: the watch brings it.
	if errors.Is(err, errSpecChanged) || errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrConflict) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot update the status of APIService %s: %w", s.Name, err)
	}
	out, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return nil, fmt.Errorf("cannot update the status of APIService %s: stored as %T", s.Name, obj)
	}
	was := helper.GetAPIServiceConditionByType(s, apiregistrationv1.Available)
	if was == nil || was.Status != cond.Status {
		c.log.Info("APIService availability changed", "apiservice", s.Name, "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
	}
	return out, nil
}

// check is the Available condition of a remote APIService now, by
// upstream's checks in upstream's order.
func (c *Controller) check(ctx context.Context, s *apiregistrationv1.APIService) apiregistrationv1.APIServiceCondition {
	ref := s.Spec.Service
	cond := func(status apiregistrationv1.ConditionStatus, reason, message string, args ...any) apiregistrationv1.APIServiceCondition {
		return apiregistrationv1.APIServiceCondition{
			Type: apiregistrationv1.Available, Status: status, LastTransitionTime: metav1.Now(),
			Reason: reason, Message: fmt.Sprintf(message, args...),
		}
	}
	svc, err := c.cfg.Backends.Service(ctx, ref.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return cond(apiregistrationv1.ConditionFalse, "ServiceNotFound", "service/%s in %q is not present", ref.Name, ref.Namespace)
	}
	if err != nil {
		return cond(apiregistrationv1.ConditionUnknown, "ServiceAccessError", "service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	if svc.Spec.Type == corev1.ServiceTypeClusterIP {
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
		if i < 0 {
			return cond(apiregistrationv1.ConditionFalse, "ServicePortError", "service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, port)
		}
		portName := svc.Spec.Ports[i].Name
		eps, err := c.cfg.Backends.EndpointSlices(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return cond(apiregistrationv1.ConditionUnknown, "EndpointsAccessError", "service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)
		}
		if len(eps) == 0 {
			return cond(apiregistrationv1.ConditionFalse, "EndpointsNotFound", "cannot find endpointslices for service/%s in %q", ref.Name, ref.Namespace)
		}
		if !hasAvailableEndpoint(portName, eps) {
			return cond(apiregistrationv1.ConditionFalse, "MissingEndpoints", "endpointslices for service/%s in %q have no addresses with port name %q", ref.Name, ref.Namespace, portName)
		}
	}
	if err := c.discover(ctx, s); err != nil {
		return cond(apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", "%s", err.Error())
	}
	return cond(apiregistrationv1.ConditionTrue, "Passed", "all checks passed")
}

// hasAvailableEndpoint reports whether a slice has a ready endpoint and
// the named port.
func hasAvailableEndpoint(portName string, eps []*discoveryv1.EndpointSlice) bool {
	return slices.ContainsFunc(eps, func(s *discoveryv1.EndpointSlice) bool {
		ready := slices.ContainsFunc(s.Endpoints, func(e discoveryv1.Endpoint) bool {
			return e.Conditions.Ready == nil || *e.Conditions.Ready
		})
		return ready && slices.ContainsFunc(s.Ports, func(p discoveryv1.EndpointPort) bool {
			return p.Name != nil && *p.Name == portName && p.Port != nil
		})
	})
}

// discover makes the discovery requests at once; nil when one answers
// with a 2xx or 3xx, else the last failure.
func (c *Controller) discover(ctx context.Context, s *apiregistrationv1.APIService) error {
	rt, err := aggregator.Transport(s, c.cfg.CertPEM, c.cfg.KeyPEM, c.cfg.Dial)
	if err != nil {
		return err
	}
	// A transport for each check (client-go keeps none with a proxy
	// setting): its connections end with the check.
	defer func() {
		if ic, ok := rt.(interface{ CloseIdleConnections() }); ok {
			ic.CloseIdleConnections()
		}
	}()
	client := &http.Client{
		Transport:     rt,
		Timeout:       c.cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	path := "/apis/" + s.Spec.Group + "/" + s.Spec.Version
	if s.Name == "v1." {
		path = "/api/" + s.Spec.Version
	}
	// As upstream, a success does not cut the other attempts short (the
	// extension server would log each cut request as a failure); each
	// is bounded by the client's timeout, and all have ended when
	// discover returns.
	results := make(chan error, attempts)
	for range attempts {
		go func() { results <- c.discoverOnce(ctx, client, s, path) }()
	}
	passed := false
	var last error
	for range attempts {
		if err := <-results; err == nil {
			passed = true
		} else {
			last = err
		}
	}
	if passed {
		return nil
	}
	return last
}

func (c *Controller) discoverOnce(ctx context.Context, client *http.Client, s *apiregistrationv1.APIService, path string) error {
	u, err := c.cfg.Backends.Resolve(ctx, s.Spec.Service)
	if err != nil {
		return err
	}
	u.Path = path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	// system:masters: the check is always allowed.
	transport.SetAuthProxyHeaders(req, "system:kube-aggregator", "", []string{"system:masters"}, nil)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("failing or missing response from %v: %w", u, err)
	}
	resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		return fmt.Errorf("failing or missing response from %v: bad status from %v: %d", u, u, resp.StatusCode)
	}
	return nil
}
