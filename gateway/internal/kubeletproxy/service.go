package kubeletproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/util/proxy"
	api "k8s.io/kubernetes/pkg/apis/core"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
)

var (
	servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	slicesGVR   = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

// serviceLocation is upstream's service REST ResourceLocation
// (pkg/registry/core/service/storage): "name", "name:port" or
// "scheme:name:port", a port number mapped to its port name, a random
// ready endpoint of the Service's EndpointSlices chosen by upstream's
// proxy.RandomEndpoint among those that are the IP of the pod they name;
// and the address check of allowed.
func (p *Proxy) serviceLocation(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, nil, apierror.BadRequest(fmt.Sprintf("invalid service request %q", id))
	}
	ns, _ := genericrequest.NamespaceFrom(ctx)
	obj, err := p.get(ctx, servicesGVR, ns, name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil, apierror.NotFound(schema.GroupResource{Resource: "services"}, name)
		}
		return nil, nil, err
	}
	svc := &corev1.Service{}
	if err := p.d.Scheme.Convert(obj, svc, nil); err != nil {
		return nil, nil, fmt.Errorf("cannot convert service %s/%s: %w", ns, name, err)
	}
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		found := false
		for _, sp := range svc.Spec.Ports {
			if int64(sp.Port) == n {
				port, found = sp.Name, true
				break
			}
		}
		if !found {
			return nil, nil, apierror.ServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, name))
		}
	}
	slices, err := p.endpointSlices(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	if len(slices) == 0 {
		return nil, nil, apierror.ServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	family := corev1.IPv4Protocol
	if len(svc.Spec.IPFamilies) > 0 {
		family = svc.Spec.IPFamilies[0]
	}
	hostPort, err := proxy.RandomEndpoint(name, slices, port, family, func(ep *discoveryv1.Endpoint) bool {
		return p.validEndpoint(ctx, ns, ep)
	})
	if err != nil {
		return nil, nil, err
	}
	return &url.URL{Scheme: scheme, Host: hostPort}, p.plain, nil
}

// validEndpoint: upstream proxies only to addresses that are the IP of
// the pod the endpoint names; kgate also only to addresses it may dial.
func (p *Proxy) validEndpoint(ctx context.Context, ns string, ep *discoveryv1.Endpoint) bool {
	if ep.TargetRef == nil || ep.TargetRef.Namespace != ns || len(ep.Addresses) == 0 {
		return false
	}
	if ip := net.ParseIP(ep.Addresses[0]); ip == nil || !p.allowed(ip) {
		return false
	}
	obj, err := podGetter{p}.Get(ctx, ep.TargetRef.Name, nil)
	if err != nil {
		return false
	}
	for _, ip := range obj.(*api.Pod).Status.PodIPs {
		if ip.IP == ep.Addresses[0] {
			return true
		}
	}
	return false
}

// endpointSlices are the EndpointSlices of service name in ns (label
// kubernetes.io/service-name), read from etcd page by page.
func (p *Proxy) endpointSlices(ctx context.Context, ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	res, ok := p.d.Registry.Lookup(slicesGVR)
	if !ok {
		return nil, nil
	}
	var out []*discoveryv1.EndpointSlice
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := p.d.Store.List(ctx, res, ns, opts)
		if err != nil {
			return nil, fmt.Errorf("cannot list the endpoint slices of service %s/%s: %w", ns, name, err)
		}
		for _, obj := range page.Items {
			s := &discoveryv1.EndpointSlice{}
			if typed, ok := obj.(*discoveryv1.EndpointSlice); ok {
				s = typed
			} else if err := p.d.Scheme.Convert(obj, s, nil); err != nil {
				return nil, fmt.Errorf("cannot convert an endpoint slice: %w", err)
			}
			if s.Labels[discoveryv1.LabelServiceName] == name {
				out = append(out, s)
			}
		}
		if page.Last == "" {
			return out, nil
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
}
