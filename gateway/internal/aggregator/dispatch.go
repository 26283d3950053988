package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/hijackhttp"
	"github.com/kgate/kgate/storage/registry"
)

// GVR is the resource of APIServices, fed to the gateway (feed.Store).
var GVR = apiregistrationv1.SchemeGroupVersion.WithResource("apiservices")

// Config configures the dispatch of aggregated requests, with
// kube-apiserver's flags.
type Config struct {
	// ProxyClientCertFile, ProxyClientKeyFile: the front-proxy client
	// certificate presented to extension servers
	// (--proxy-client-cert-file, --proxy-client-key-file); both or none.
	ProxyClientCertFile, ProxyClientKeyFile string
	// EnableAggregatorRouting routes to an endpoint of the Service
	// instead of its cluster IP (--enable-aggregator-routing).
	EnableAggregatorRouting bool
	// AllowLoopback lets extension servers resolve to loopback and
	// link-local addresses: tests and development only.
	AllowLoopback bool
	// MaxSession bounds one proxied request or watch; zero: unbounded.
	MaxSession time.Duration
}

// Resolver is the Resolver of these settings over the store.
func (c Config) Resolver(reg *registry.Registry, store objectStore) *Resolver {
	return &Resolver{Registry: reg, Store: store, AggregatorRouting: c.EnableAggregatorRouting, AllowLoopback: c.AllowLoopback}
}

// ProxyClientCert reads the front-proxy client certificate and key
// (PEM); none when no files are set.
func (c Config) ProxyClientCert() (cert, key []byte, err error) {
	if c.ProxyClientCertFile == "" {
		return nil, nil, nil
	}
	if cert, err = os.ReadFile(c.ProxyClientCertFile); err != nil {
		return nil, nil, fmt.Errorf("cannot read the proxy client certificate: %w", err)
	}
	if key, err = os.ReadFile(c.ProxyClientKeyFile); err != nil {
		return nil, nil, fmt.Errorf("cannot read the proxy client key: %w", err)
	}
	return cert, key, nil
}

// Deps are what the dispatch runs on.
type Deps struct {
	Registry *registry.Registry
	Store    objectStore
	// Services is the feed's store of APIServices.
	Services *feed.Store
	Logger   *slog.Logger
}

// Dispatch serves the requests under /apis/<group>/<version> of
// non-local APIServices (spec.service set), already authenticated and
// authorized, with Proxy on the hijacked connection.
type Dispatch struct {
	proxy    *Proxy
	services *Services
	srv      *hijackhttp.Server
	remote   *RemoteDiscovery
	openAPI  *RemoteOpenAPI
	running  sync.WaitGroup // the remote discovery's and OpenAPI's loops
}

// NewDispatch checks cfg and reads the front-proxy certificate; base is
// the gateway's lifetime: proxied requests end when it is cancelled.
func NewDispatch(base context.Context, cfg Config, d Deps) (*Dispatch, error) {
	if d.Registry == nil || d.Store == nil || d.Services == nil || d.Logger == nil {
		return nil, errors.New("cannot make aggregator: Registry, Store, Services and Logger are required")
	}
	if (cfg.ProxyClientCertFile == "") != (cfg.ProxyClientKeyFile == "") {
		return nil, errors.New("cannot make aggregator: --proxy-client-cert-file and --proxy-client-key-file go together")
	}
	services := &Services{Store: d.Services}
	resolver := cfg.Resolver(d.Registry, d.Store)
	p := &Proxy{Services: services, Resolver: resolver, Dial: resolver.Dial}
	var err error
	if p.CertPEM, p.KeyPEM, err = cfg.ProxyClientCert(); err != nil {
		return nil, err
	}
	return &Dispatch{
		proxy: p, services: services,
		srv:     &hijackhttp.Server{Base: base, Log: d.Logger, MaxSession: cfg.MaxSession},
		remote:  &RemoteDiscovery{Services: services, Proxy: p, Log: d.Logger},
		openAPI: &RemoteOpenAPI{Services: services, Proxy: p, Log: d.Logger},
	}, nil
}

// Remote is the extension servers' groups for the gateway's discovery.
func (d *Dispatch) Remote() *RemoteDiscovery { return d.remote }

// RemoteOpenAPI is the extension servers' OpenAPI documents for the
// gateway's.
func (d *Dispatch) RemoteOpenAPI() *RemoteOpenAPI { return d.openAPI }

// Start begins fetching the extension servers' discovery and OpenAPI
// documents, until the base context ends.
func (d *Dispatch) Start() {
	d.running.Go(func() { d.remote.Run(d.srv.Base) })
	d.running.Go(func() { d.openAPI.Run(d.srv.Base) })
}

// Serves reports whether path belongs to a non-local APIService: its
// requests, discovery of its group/version included, are proxied.
func (d *Dispatch) Serves(path string) bool {
	name, ok := apiServiceName(path)
	if !ok {
		return false
	}
	s, ok := d.services.Get(name)
	return ok && s.Spec.Service != nil
}

// Serve proxies the request as u (the user after impersonation).
func (d *Dispatch) Serve(rc *fasthttp.RequestCtx, u user.Info) error {
	if d.srv.Base.Err() != nil {
		rc.SetConnectionClose()
		return apierror.TooManyRequests("the gateway is shutting down, please try again later", 1)
	}
	d.srv.Serve(rc, "aggregated "+string(rc.Path()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.proxy.ServeHTTP(w, r.WithContext(genericrequest.WithUser(r.Context(), u)))
	}))
	return nil
}

// Wait waits until every proxied request and the fetches have
// ended, after the base context was cancelled (hijackhttp.Server.Wait).
func (d *Dispatch) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { d.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("cannot stop the aggregator's fetches of discovery and OpenAPI: %w", ctx.Err())
	}
	return d.srv.Wait(ctx)
}

// Services finds APIServices by name in the feed's store, indexed again
// whenever the store changes.
type Services struct {
	Store *feed.Store

	mu     sync.Mutex // guards gen and byName
	gen    uint64
	byName map[string]*apiregistrationv1.APIService
}

// Get returns the APIService name.
func (s *Services) Get(name string) (*apiregistrationv1.APIService, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.indexLocked()[name]
	return a, ok
}

// indexLocked returns the APIServices by name, indexed again when the
// store changed; s.mu is held.
func (s *Services) indexLocked() map[string]*apiregistrationv1.APIService {
	if g := s.Store.Generation(); s.byName == nil || g != s.gen {
		objs := s.Store.List("")
		m := make(map[string]*apiregistrationv1.APIService, len(objs))
		for _, o := range objs {
			if a, ok := o.(*apiregistrationv1.APIService); ok {
				m[a.Name] = a
			}
		}
		s.byName, s.gen = m, g
	}
	return s.byName
}
