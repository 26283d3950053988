package kubeletproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authentication/user"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	translator "k8s.io/apiserver/pkg/util/proxy"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/features"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/hijackhttp"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

// handler admits a connect request (admitted), resolves its target
// (everything that can fail before the connection is hijacked) and
// returns the net/http
// handler that proxies it, built as upstream's connect REST objects
// (pkg/registry/core/pod/rest/subresources.go, node/rest/proxy.go)
// build theirs.
func (p *Proxy) handler(ctx context.Context, info *requestinfo.Info, u user.Info, query url.Values) (http.Handler, error) {
	name := info.Name
	responder := statusResponder{gr: schema.GroupResource{Resource: info.Resource}, name: name}
	switch info.Resource + "/" + info.Subresource {
	case "pods/exec":
		opts := &api.PodExecOptions{}
		if err := p.connectOptions(ctx, info, u, query, &corev1.PodExecOptions{}, opts); err != nil {
			return nil, err
		}
		loc, conn, err := pod.ExecLocation(ctx, podGetter{p}, p.conns, name, opts)
		if err != nil {
			return nil, err
		}
		return p.streamHandler(loc, conn, responder, translator.Options{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY}), nil
	case "pods/attach":
		opts := &api.PodAttachOptions{}
		if err := p.connectOptions(ctx, info, u, query, &corev1.PodAttachOptions{}, opts); err != nil {
			return nil, err
		}
		loc, conn, err := pod.AttachLocation(ctx, podGetter{p}, p.conns, name, opts)
		if err != nil {
			return nil, err
		}
		return p.streamHandler(loc, conn, responder, translator.Options{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY}), nil
	case "pods/portforward":
		opts := &api.PodPortForwardOptions{}
		if err := p.connectOptions(ctx, info, u, query, &corev1.PodPortForwardOptions{}, opts); err != nil {
			return nil, err
		}
		loc, conn, err := pod.PortForwardLocation(ctx, podGetter{p}, p.conns, name, opts)
		if err != nil {
			return nil, err
		}
		h := p.upgradeAware(loc, conn.Transport, false, true, responder)
		if utilfeature.DefaultFeatureGate.Enabled(features.PortForwardWebsockets) &&
			!(utilfeature.DefaultFeatureGate.Enabled(features.ExtendWebSocketsToKubelet) && nodeSupportsWebsockets(conn)) {
			return translator.NewTranslatingHandler(h, translator.NewTunnelingHandler(h), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
		}
		return h, nil
	case "pods/proxy":
		opts := &api.PodProxyOptions{}
		if err := p.admitted(ctx, info, u, &corev1.PodProxyOptions{Path: proxyPath(info)}, opts); err != nil {
			return nil, err
		}
		loc, rt, err := p.podLocation(ctx, name)
		if err != nil {
			return nil, err
		}
		loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, opts.Path)
		return p.upgradeAware(loc, rt, true, false, responder), nil
	case "services/proxy":
		opts := &api.ServiceProxyOptions{}
		if err := p.admitted(ctx, info, u, &corev1.ServiceProxyOptions{Path: proxyPath(info)}, opts); err != nil {
			return nil, err
		}
		loc, rt, err := p.serviceLocation(ctx, name)
		if err != nil {
			return nil, err
		}
		loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, opts.Path)
		return p.upgradeAware(loc, rt, true, false, responder), nil
	case "nodes/proxy":
		opts := &api.NodeProxyOptions{}
		if err := p.admitted(ctx, info, u, &corev1.NodeProxyOptions{Path: proxyPath(info)}, opts); err != nil {
			return nil, err
		}
		loc, rt, err := p.nodeLocation(ctx, name)
		if err != nil {
			return nil, err
		}
		loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, opts.Path)
		return p.upgradeAware(loc, rt, true, false, responder), nil
	}
	return nil, fmt.Errorf("cannot proxy %s/%s: %w", info.Resource, info.Subresource, errors.New("not a connect subresource"))
}

// streamHandler is exec's and attach's: upgrades proxied to the kubelet,
// WebSocket v5 ones translated to SPDY unless the node says its kubelet
// speaks WebSocket (upstream's TranslateStreamCloseWebsocketRequests).
func (p *Proxy) streamHandler(loc *url.URL, conn *kubeletclient.ConnectionInfo, responder statusResponder, opts translator.Options) http.Handler {
	h := p.upgradeAware(loc, conn.Transport, false, true, responder)
	if !utilfeature.DefaultFeatureGate.Enabled(features.TranslateStreamCloseWebsocketRequests) ||
		(utilfeature.DefaultFeatureGate.Enabled(features.ExtendWebSocketsToKubelet) && nodeSupportsWebsockets(conn)) {
		return h
	}
	st := translator.NewStreamTranslatorHandler(loc, conn.Transport, 0, opts)
	return translator.NewTranslatingHandler(h, st, wsstream.IsWebSocketRequestWithStreamCloseProtocol)
}

func nodeSupportsWebsockets(conn *kubeletclient.ConnectionInfo) bool {
	return slices.Contains(conn.NodeFeatures, string(features.ExtendWebSocketsToKubelet))
}

func (p *Proxy) upgradeAware(loc *url.URL, rt http.RoundTripper, wrapTransport, upgradeRequired bool, responder statusResponder) *proxy.UpgradeAwareHandler {
	return proxy.NewUpgradeAwareHandler(loc, rt, wrapTransport, upgradeRequired, responder)
}

// decode reads connect options from the query as upstream's parameter
// codec does (v1 → internal).
func (p *Proxy) decode(query url.Values, into runtime.Object) error {
	if err := p.params.DecodeParameters(query, corev1.SchemeGroupVersion, into); err != nil {
		return apierror.BadRequest(fmt.Sprintf("cannot decode the options: %v", err))
	}
	return nil
}

// statusResponder writes the errors of a proxied request, once the
// connection is hijacked, as the metav1.Status the gateway would.
type statusResponder struct {
	gr   schema.GroupResource
	name string
}

func (s statusResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	hijackhttp.WriteStatus(w, err, s.gr, s.name)
}
