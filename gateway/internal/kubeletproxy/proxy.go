// Package kubeletproxy serves the connect subresources kube-apiserver
// proxies: pods/log, pods/exec, pods/attach, pods/portforward (to the
// kubelet of the pod's node), pods/proxy (to the pod) and nodes/proxy (to
// the node), services/proxy (to an endpoint of the service). All but
// pods/log first pass the admission chain as upstream's connect requests
// do (operation CONNECT, the options as the object: webhooks and
// admission policies may refuse or change them). Targets are resolved by
// upstream's own helpers
// (k8s.io/kubernetes/pkg/registry/core/pod, pkg/kubelet/client) over
// kgate's store; requests are served on the connection hijacked from
// fasthttp by upstream's net/http proxy handlers (apimachinery's
// UpgradeAwareHandler, apiserver's WebSocket stream translator and
// port-forward tunnel), so upgrades (SPDY, WebSocket v5.channel.k8s.io)
// are spliced both ways without buffering. The client's credentials
// (Authorization, impersonation and X-Remote-* headers; its certificate
// ends at the gateway's TLS) never reach the backend.
package kubeletproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/hijackhttp"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// DefaultPreferredAddressTypes is kube-apiserver's default
// --kubelet-preferred-address-types.
var DefaultPreferredAddressTypes = []string{"Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP"}

// DefaultKubeletPort is kube-apiserver's --kubelet-port: used when a Node
// does not report status.daemonEndpoints.kubeletEndpoint.port.
const DefaultKubeletPort = 10250

// Config are the proxy's settings, as kube-apiserver's --kubelet-* flags.
type Config struct {
	// ClientCertFile and ClientKeyFile are the client certificate the
	// proxy presents to kubelets (--kubelet-client-certificate/-key).
	ClientCertFile, ClientKeyFile string
	// CAFile verifies kubelets' serving certificates
	// (--kubelet-certificate-authority); unset, they are not verified, as
	// upstream.
	CAFile string
	// PreferredAddressTypes orders a Node's status.addresses; default
	// DefaultPreferredAddressTypes.
	PreferredAddressTypes []string
	// KubeletPort is used for Nodes without a kubelet endpoint port;
	// default DefaultKubeletPort.
	KubeletPort uint
	// AllowLoopbackTargets lets the proxy dial loopback and link-local
	// addresses (tests, one-machine clusters); off, it refuses them as
	// upstream's node and pod proxies do.
	AllowLoopbackTargets bool
	// MaxSession bounds one proxied request or upgraded session; zero:
	// unbounded (upstream's exec and port-forward sessions are).
	MaxSession time.Duration
	// DialTimeout bounds reaching the backend and reading its response
	// headers. Default 30s.
	DialTimeout time.Duration
	// WriteTimeout bounds each write of a log stream to its client.
	// Default 30s.
	WriteTimeout time.Duration
}

// objectStore reads objects (storage.Store).
type objectStore interface {
	Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error)
	List(ctx context.Context, res *registry.Resource, ns string, opts storage.ListOptions) (*storage.ListResult, error)
}

// Deps are what the proxy runs on.
type Deps struct {
	Registry *registry.Registry
	Store    objectStore
	// Scheme converts pods to the internal version upstream's helpers
	// take and decodes connect options (builtin.Semantics.Scheme).
	Scheme *runtime.Scheme
	// Authorizer checks the create verb of WebSocket upgrades of exec,
	// attach and portforward, which arrive as GET (upstream's
	// AuthorizePodWebsocketUpgradeCreatePermission).
	Authorizer authz.Authorizer
	// Admission admits exec, attach, portforward and the proxies
	// (operation CONNECT); nil admits everything.
	Admission Admission
	Logger    *slog.Logger
	// Resolver resolves kubelet host names; nil: net.DefaultResolver.
	Resolver *net.Resolver
}

// Proxy serves the connect subresources.
type Proxy struct {
	cfg      Config
	d        Deps
	base     context.Context
	log      *slog.Logger
	params   runtime.ParameterCodec
	conns    kubeletclient.ConnectionInfoGetter // guarded
	plain    http.RoundTripper                  // to pods and other node ports
	resolver *net.Resolver
	srv      *hijackhttp.Server
}

// New builds a proxy; base is the gateway's lifetime: sessions end when
// it is cancelled.
func New(base context.Context, cfg Config, d Deps) (*Proxy, error) {
	if d.Registry == nil || d.Store == nil || d.Scheme == nil || d.Authorizer == nil || d.Logger == nil {
		return nil, errors.New("cannot make kubelet proxy: Registry, Store, Scheme, Authorizer and Logger are required")
	}
	if (cfg.ClientCertFile == "") != (cfg.ClientKeyFile == "") {
		return nil, errors.New("cannot make kubelet proxy: the kubelet client certificate and key go together")
	}
	if len(cfg.PreferredAddressTypes) == 0 {
		cfg.PreferredAddressTypes = DefaultPreferredAddressTypes
	}
	for _, t := range cfg.PreferredAddressTypes {
		switch t {
		case "Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP":
		default:
			return nil, fmt.Errorf("cannot make kubelet proxy: unknown kubelet address type %q", t)
		}
	}
	if cfg.KubeletPort == 0 {
		cfg.KubeletPort = DefaultKubeletPort
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	p := &Proxy{cfg: cfg, d: d, base: base, log: d.Logger, params: runtime.NewParameterCodec(d.Scheme), resolver: d.Resolver}
	p.srv = &hijackhttp.Server{Base: base, Log: d.Logger, MaxSession: cfg.MaxSession}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	inner, err := kubeletclient.NewNodeConnectionInfoGetter(kubeletclient.NodeGetterFunc(p.getNode), kubeletclient.KubeletClientConfig{
		Port:                  cfg.KubeletPort,
		PreferredAddressTypes: cfg.PreferredAddressTypes,
		TLSClientConfig:       kubeletclient.KubeletTLSConfig{CertFile: cfg.ClientCertFile, KeyFile: cfg.ClientKeyFile, CAFile: cfg.CAFile},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make kubelet proxy: %w", err)
	}
	p.conns = guardedConnections{p: p, inner: inner}
	p.plain = &http.Transport{
		Proxy:                 nil, // never through an environment proxy
		DialContext:           p.dialContext,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		ResponseHeaderTimeout: cfg.DialTimeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return p, nil
}

// dialContext dials for the plain transport, checking the address again
// at dial time (a name may resolve elsewhere by then).
func (p *Proxy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := p.checkHost(ctx, host); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	return d.DialContext(ctx, network, addr)
}

// Serves reports whether info names a subresource the proxy serves.
func Serves(info *requestinfo.Info) bool {
	if !info.IsResourceRequest || info.APIGroup != "" || info.APIVersion != "v1" || info.Name == "" {
		return false
	}
	switch info.Resource + "/" + info.Subresource {
	case "pods/log", "pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "nodes/proxy", "services/proxy":
		return true
	}
	return false
}

// Serves reports whether the proxy serves info (the package's Serves).
func (p *Proxy) Serves(info *requestinfo.Info) bool { return Serves(info) }

// Serve handles one connect request, already authenticated and
// authorized with its verb (get for a log; create or get, by method, for
// the others); u is the user it runs as.
func (p *Proxy) Serve(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) error {
	if p.base.Err() != nil {
		rc.SetConnectionClose()
		return apierror.TooManyRequests("the gateway is shutting down, please try again later", 1)
	}
	gr := schema.GroupResource{Resource: info.Resource}
	method := string(rc.Method())
	switch info.Subresource {
	case "log":
		if method != http.MethodGet {
			return apierror.MethodNotSupported(gr, info.Verb)
		}
	case "exec", "attach", "portforward":
		if method != http.MethodGet && method != http.MethodPost {
			return apierror.MethodNotSupported(gr, info.Verb)
		}
		if method == http.MethodGet {
			// upstream's ensureAuthorizedForVerb: a WebSocket upgrade
			// needs what SPDY's POST needs.
			if err := p.authorizeCreate(info, u); err != nil {
				return err
			}
		}
	case "proxy":
		switch method {
		case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
		default:
			return apierror.MethodNotSupported(gr, info.Verb)
		}
	}
	query, err := url.ParseQuery(string(rc.URI().QueryString()))
	if err != nil {
		return apierror.BadRequest(fmt.Sprintf("cannot parse the query: %v", err))
	}
	ctx, cancel := context.WithTimeout(p.base, p.cfg.DialTimeout)
	defer cancel()
	if info.Namespace != "" {
		ctx = genericrequest.WithNamespace(ctx, info.Namespace)
	}
	if info.Subresource == "log" {
		return p.serveLog(ctx, rc, info, query)
	}
	h, err := p.handler(ctx, info, u, query)
	if err != nil {
		return err
	}
	p.srv.Serve(rc, info.Resource+"/"+info.Subresource, h)
	return nil
}

// authorizeCreate checks that u may create the subresource of info.
func (p *Proxy) authorizeCreate(info *requestinfo.Info, u user.Info) error {
	at := authz.AttributesFor(u, info)
	at.Verb = "create"
	d, reason, err := authz.Evaluate(p.d.Authorizer, at)
	if d == authz.Allow {
		return nil
	}
	if d == authz.NoOpinion && err != nil {
		return apierror.InternalError(fmt.Errorf("cannot authorize the request: %w", err))
	}
	msg := fmt.Sprintf("User %q cannot create resource %q in API group %q", u.GetName(), info.Resource+"/"+info.Subresource, info.APIGroup)
	if info.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", info.Namespace)
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierror.Forbidden(schema.GroupResource{Resource: info.Resource + "/" + info.Subresource}, info.Name, errors.New(msg))
}

// proxyPath is the path after .../{name}/proxy, as upstream's "path"
// connect parameter: with a leading slash, keeping a trailing one.
func proxyPath(info *requestinfo.Info) string {
	if len(info.Parts) <= 3 {
		if strings.HasSuffix(info.Path, "/proxy/") {
			return "/"
		}
		return ""
	}
	p := "/" + strings.Join(info.Parts[3:], "/")
	if strings.HasSuffix(info.Path, "/") {
		p += "/"
	}
	return p
}

// Wait waits until every proxied session has ended, after the base
// context was cancelled (hijackhttp.Server.Wait).
func (p *Proxy) Wait(ctx context.Context) error { return p.srv.Wait(ctx) }
