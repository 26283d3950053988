package aggregator

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/hijackhttp"
)

// APIServices finds the APIService of a group/version (a feed of the
// stored ones).
type APIServices interface {
	Get(name string) (*apiregistrationv1.APIService, bool)
}

// Proxy is kube-aggregator's proxy handler as a net/http handler for the
// requests of non-local APIServices, already authenticated and
// authorized: the user (after impersonation) is in the request's context
// (k8s.io/apiserver's request.WithUser).
type Proxy struct {
	Services APIServices
	Resolver *Resolver
	// CertPEM, KeyPEM are the front-proxy client certificate.
	CertPEM, KeyPEM []byte
	Dial            DialFunc
	// SendUID sends X-Remote-Uid (upstream's RemoteRequestHeaderUID).
	SendUID bool

	mu         sync.Mutex                 // guards transports
	transports map[string]cachedTransport // by APIService name
}

type cachedTransport struct {
	rv string // the APIService's resourceVersion it was built from
	rt http.RoundTripper
}

// ServeHTTP proxies r to its APIService's backend, as upstream's
// proxyHandler.ServeHTTP: 503 while the APIService is not Available or
// its service does not resolve, the user in X-Remote-* (set on the
// request too for upgrades, which bypass the round tripper), upgrades
// and streaming responses spliced by apimachinery's UpgradeAwareHandler.
// Errors are metav1.Status.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := p.serve(w, r); err != nil {
		writeStatus(w, err)
	}
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) error {
	name, ok := apiServiceName(r.URL.Path)
	if !ok {
		return apierror.NotFound(schema.GroupResource{}, r.URL.Path)
	}
	s, ok := p.Services.Get(name)
	if !ok || s.Spec.Service == nil {
		return apierror.NotFound(schema.GroupResource{}, r.URL.Path)
	}
	return p.serveService(w, r, s)
}

// ServeService proxies r, whatever its path, to the backend of s (a
// non-local APIService), as ServeHTTP does: the aggregator's own
// fetches of an extension server's OpenAPI documents.
func (p *Proxy) ServeService(w http.ResponseWriter, r *http.Request, s *apiregistrationv1.APIService) {
	if err := p.serveService(w, r, s); err != nil {
		writeStatus(w, err)
	}
}

func (p *Proxy) serveService(w http.ResponseWriter, r *http.Request, s *apiregistrationv1.APIService) error {
	if !helper.IsAPIServiceConditionTrue(s, apiregistrationv1.Available) {
		return apierror.ServiceUnavailable("service unavailable")
	}
	u, ok := genericrequest.UserFrom(r.Context())
	if !ok {
		return apierror.InternalError(errors.New("missing user"))
	}
	rt, err := p.transport(s)
	if err != nil {
		return apierror.InternalError(err)
	}
	loc, err := p.Resolver.Resolve(r.Context(), s.Spec.Service)
	if err != nil {
		return apierror.ServiceUnavailable("service unavailable")
	}
	loc.Path = r.URL.Path
	loc.RawQuery = r.URL.Query().Encode()
	out := r.Clone(r.Context())
	out.Header = Outbound(r.Header, u, p.SendUID)
	upgrade := httpstream.IsUpgradeRequest(r)
	if !upgrade {
		// As upstream: the round tripper sets the identity again on
		// the request the reverse proxy sends (the upgrade path dials
		// directly and sends out's header as it is).
		uid := ""
		if p.SendUID {
			uid = u.GetUID()
		}
		rt = transport.NewAuthProxyRoundTripper(u.GetName(), uid, u.GetGroups(), u.GetExtra(), rt)
	}
	h := proxy.NewUpgradeAwareHandler(loc, rt, true, upgrade, responder{})
	h.RejectForwardingRedirects = true
	h.ServeHTTP(w, out)
	return nil
}

// apiServiceName is "<version>.<group>" of a path /apis/<group>/<version>/...
func apiServiceName(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return "", false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", false
	}
	return parts[1] + "." + parts[0], true
}

// transport returns the APIService's round tripper, built again when
// the APIService changed.
func (p *Proxy) transport(s *apiregistrationv1.APIService) (http.RoundTripper, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.transports[s.Name]; ok && c.rv == s.ResourceVersion {
		return c.rt, nil
	}
	dial := p.Dial
	if dial == nil {
		d := &net.Dialer{}
		dial = d.DialContext
	}
	rt, err := Transport(s, p.CertPEM, p.KeyPEM, dial)
	if err != nil {
		return nil, err
	}
	if p.transports == nil {
		p.transports = map[string]cachedTransport{}
	}
	p.transports[s.Name] = cachedTransport{rv: s.ResourceVersion, rt: rt}
	return rt, nil
}

// responder writes the UpgradeAwareHandler's errors as a metav1.Status
// (upstream: 503 "service unavailable" for a backend it cannot reach).
type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	writeStatus(w, apierror.ServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
}

func writeStatus(w http.ResponseWriter, err error) {
	hijackhttp.WriteStatus(w, err, schema.GroupResource{}, "")
}
