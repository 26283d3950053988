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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	api "k8s.io/kubernetes/pkg/apis/core"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
)

var (
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	nodesGR  = schema.GroupResource{Resource: "nodes"}
	podsGR   = schema.GroupResource{Resource: "pods"}
)

// podGetter is upstream's pod.ResourceGetter over kgate's store: the
// namespace comes from ctx (genericrequest.WithNamespace), as upstream's
// registry reads it, and the pod is converted to the internal version
// upstream's helpers take.
type podGetter struct{ p *Proxy }

func (g podGetter) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := genericrequest.NamespaceFrom(ctx)
	obj, err := g.p.get(ctx, podsGVR, ns, name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, apierror.NotFound(podsGR, name)
		}
		return nil, err
	}
	out := &api.Pod{}
	if err := g.p.d.Scheme.Convert(obj, out, nil); err != nil {
		return nil, fmt.Errorf("cannot convert pod %s/%s: %w", ns, name, err)
	}
	return out, nil
}

// getNode is upstream's kubelet client NodeGetter over kgate's store.
func (p *Proxy) getNode(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Node, error) {
	obj, err := p.get(ctx, nodesGVR, "", name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, apierror.NotFound(nodesGR, name)
		}
		return nil, err
	}
	if n, ok := obj.(*corev1.Node); ok {
		return n, nil
	}
	n := &corev1.Node{}
	if err := p.d.Scheme.Convert(obj, n, nil); err != nil {
		return nil, fmt.Errorf("cannot convert node %s: %w", name, err)
	}
	return n, nil
}

func (p *Proxy) get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
	res, ok := p.d.Registry.Lookup(gvr)
	if !ok {
		return nil, fmt.Errorf("cannot get %s: %v is not served", name, gvr)
	}
	return p.d.Store.Get(ctx, res, ns, name, 0)
}

// guardedConnections is upstream's NodeConnectionInfoGetter refusing
// kubelet addresses the proxy may not dial (see Proxy.allowed).
type guardedConnections struct {
	p     *Proxy
	inner kubeletclient.ConnectionInfoGetter
}

func (g guardedConnections) GetConnectionInfo(ctx context.Context, node types.NodeName) (*kubeletclient.ConnectionInfo, error) {
	info, err := g.inner.GetConnectionInfo(ctx, node)
	if err != nil {
		return nil, err
	}
	if err := g.p.checkHost(ctx, info.Hostname); err != nil {
		return nil, err
	}
	return info, nil
}

// checkHost refuses a host that resolves to an address that is not
// global unicast (loopback, link-local, multicast, unspecified), as
// upstream's node proxy does, unless AllowLoopbackTargets.
func (p *Proxy) checkHost(ctx context.Context, host string) error {
	addrs, err := p.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return apierror.BadRequest(fmt.Sprintf("cannot resolve %q: %v", host, err))
	}
	if len(addrs) == 0 {
		return apierror.BadRequest("no addresses for hostname")
	}
	for _, a := range addrs {
		if !p.allowed(a.IP) {
			return apierror.BadRequest("address not allowed")
		}
	}
	return nil
}

// allowed says whether the proxy may dial ip.
func (p *Proxy) allowed(ip net.IP) bool {
	if ip.IsGlobalUnicast() {
		return true
	}
	return p.cfg.AllowLoopbackTargets && (ip.IsLoopback() || ip.IsLinkLocalUnicast())
}

// nodeLocation is upstream's node.ResourceLocation (pkg/registry/core/node)
// with the address check of checkHost: the kubelet's own port goes
// through the kubelet transport (client certificate), any other port
// through the plain proxy transport.
func (p *Proxy) nodeLocation(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, nil, apierror.BadRequest(fmt.Sprintf("invalid node request %q", id))
	}
	info, err := p.conns.GetConnectionInfo(ctx, types.NodeName(name))
	if err != nil {
		return nil, nil, err
	}
	if port == "" || port == info.Port {
		return &url.URL{Scheme: info.Scheme, Host: net.JoinHostPort(info.Hostname, info.Port)}, info.Transport, nil
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(info.Hostname, port)}, p.plain, nil
}

// podLocation is upstream's pod.ResourceLocation (pkg/registry/core/pod)
// with the address check of allowed: "name", "name:port" or
// "scheme:name:port", the port defaulting to the first declared one.
func (p *Proxy) podLocation(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, nil, apierror.BadRequest(fmt.Sprintf("invalid pod request %q", id))
	}
	obj, err := podGetter{p}.Get(ctx, name, nil)
	if err != nil {
		return nil, nil, err
	}
	pod := obj.(*api.Pod)
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	var podIP string
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	if ip := net.ParseIP(podIP); ip == nil || !p.allowed(ip) {
		return nil, nil, apierror.BadRequest("address not allowed")
	}
	loc := &url.URL{Scheme: scheme, Host: podIP}
	if port != "" {
		loc.Host = net.JoinHostPort(podIP, port)
	} else if net.ParseIP(podIP).To4() == nil {
		loc.Host = "[" + podIP + "]"
	}
	return loc, p.plain, nil
}
