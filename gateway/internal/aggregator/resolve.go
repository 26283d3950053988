package aggregator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/util/proxy"
	listersv1 "k8s.io/client-go/listers/core/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

var (
	servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	slicesGVR   = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

// objectStore reads objects (storage.Store).
type objectStore interface {
	Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error)
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
}

// Resolver finds where an APIService's requests go, as kube-aggregator's
// service resolvers do with k8s.io/apiserver's proxy helpers: the
// Service's cluster IP (ResolveCluster) or, with AggregatorRouting
// (--enable-aggregator-routing), a random ready endpoint of its
// EndpointSlices (ResolveEndpoint), both over kgate's store; then the
// address check: loopback, link-local and other non-global addresses are
// refused unless AllowLoopback.
type Resolver struct {
	Registry          *registry.Registry
	Store             objectStore
	AggregatorRouting bool
	AllowLoopback     bool
}

// ErrAddress is the error of a resolved address the gateway may not dial.
var ErrAddress = errors.New("aggregator: address not allowed")

// Resolve returns the https URL (host and port) of the APIService's
// backend. Upstream's errors come back as they are (a missing Service is
// a NotFound, no ready endpoint a ServiceUnavailable).
func (r *Resolver) Resolve(ctx context.Context, ref *apiregistrationv1.ServiceReference) (*url.URL, error) {
	if ref == nil {
		return nil, errors.New("cannot resolve a local APIService")
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	services := serviceLister{ctx: ctx, r: r}
	var (
		u   *url.URL
		err error
	)
	if r.AggregatorRouting {
		u, err = proxy.ResolveEndpoint(services, sliceGetter{ctx: ctx, r: r}, ref.Namespace, ref.Name, port)
	} else {
		u, err = proxy.ResolveCluster(services, ref.Namespace, ref.Name, port)
	}
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if ip == nil {
		// An ExternalName: resolved at dial time, and checked there
		// (Dial).
		return u, nil
	}
	if !r.allowed(ip) {
		return nil, fmt.Errorf("cannot proxy to service %s/%s at %s: %w", ref.Namespace, ref.Name, host, ErrAddress)
	}
	return u, nil
}

// Service reads the Service ns/name; a missing one is a NotFound
// (apierrors.IsNotFound).
func (r *Resolver) Service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	return serviceGetter{ctx: ctx, r: r, ns: ns}.Get(name)
}

// EndpointSlices reads the EndpointSlices of the Service ns/name.
func (r *Resolver) EndpointSlices(ctx context.Context, ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	return sliceGetter{ctx: ctx, r: r}.GetEndpointSlices(ns, name)
}

// Dial dials addr, refusing the addresses Resolve refuses once the name
// is resolved (an ExternalName Service's, which Resolve cannot check).
func (r *Resolver) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		if ip := net.ParseIP(host); ip == nil || !r.allowed(ip) {
			return fmt.Errorf("cannot dial %s: %w", address, ErrAddress)
		}
		return nil
	}}
	return d.DialContext(ctx, network, addr)
}

// allowed says whether the proxy may dial ip.
func (r *Resolver) allowed(ip net.IP) bool {
	if ip.IsGlobalUnicast() {
		return true
	}
	return r.AllowLoopback && (ip.IsLoopback() || ip.IsLinkLocalUnicast())
}

// serviceLister is client-go's ServiceLister over the store, for the
// one call upstream's resolvers make: Services(ns).Get(name).
type serviceLister struct {
	listersv1.ServiceLister // nil: only Services is called
	ctx                     context.Context
	r                       *Resolver
}

func (l serviceLister) Services(ns string) listersv1.ServiceNamespaceLister {
	return serviceGetter{ctx: l.ctx, r: l.r, ns: ns}
}

type serviceGetter struct {
	listersv1.ServiceNamespaceLister // nil: only Get is called
	ctx                              context.Context
	r                                *Resolver
	ns                               string
}

func (g serviceGetter) Get(name string) (*corev1.Service, error) {
	res, ok := g.r.Registry.Lookup(servicesGVR)
	if !ok {
		return nil, errors.New("cannot resolve services: not served")
	}
	obj, err := g.r.Store.Get(g.ctx, res, g.ns, name, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, apierror.NotFound(schema.GroupResource{Resource: "services"}, name)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read service %s/%s: %w", g.ns, name, err)
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("cannot read service %s/%s: stored as %T", g.ns, name, obj)
	}
	return svc, nil
}

// sliceGetter is upstream's EndpointSliceGetter over the store: the
// slices labelled kubernetes.io/service-name=<name> in the namespace.
type sliceGetter struct {
	ctx context.Context
	r   *Resolver
}

func (g sliceGetter) GetEndpointSlices(ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	res, ok := g.r.Registry.Lookup(slicesGVR)
	if !ok {
		return nil, nil
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	var out []*discoveryv1.EndpointSlice
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := g.r.Store.List(g.ctx, res, ns, opts)
		if err != nil {
			return nil, fmt.Errorf("cannot list the endpoint slices of service %s/%s: %w", ns, name, err)
		}
		for _, obj := range page.Items {
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if ok && sel.Matches(labels.Set(s.Labels)) {
				out = append(out, s)
			}
		}
		if page.Last == "" {
			return out, nil
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
}
