// Package guard is what a gateway request passes after authentication
// and before authorization, and again once answered: audit.k8s.io/v1
// events at each stage, API Priority and Fairness (seats and queues by
// the FlowSchemas and PriorityLevelConfigurations), kgate's per-user
// limits (rates, watch and LIST budgets), and the serving TLS
// configuration with its reloading certificate. It also sees connections close
// (TrackConns), so that a watch's end and a client leaving a queue are
// noticed.
package guard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/gateway/internal/apf"
	"github.com/kgate/kgate/gateway/internal/audit"
	"github.com/kgate/kgate/gateway/internal/certreload"
	"github.com/kgate/kgate/gateway/internal/fairness"
)

// Deps are what the guard runs on.
type Deps struct {
	// TLS is the base serving configuration; required.
	TLS *tls.Config
	// NATS carries audit events when AuditConfig.NATSSubject is set.
	NATS *nats.Conn
	// Base ends when the gateway starts shutting down: requests waiting
	// for a seat give up then. Required.
	Base context.Context
	// FlowControl seats requests (apf.Controller); nil: every request
	// runs at once.
	FlowControl FlowControl
	Logger      *slog.Logger
	Metrics     prometheus.Registerer
}

// DefaultQueueMaxWait bounds a request's wait in a queue: kube-apiserver's
// quarter of its default 60 s request timeout.
const DefaultQueueMaxWait = 15 * time.Second

// FlowControl is API Priority and Fairness (apf.Controller).
type FlowControl interface {
	Handle(ctx context.Context, r apf.Request, exec func()) apf.Decision
}

// Guard is what runs between authentication and authorization, and
// after the handler: audit, fairness, and the serving certificate.
type Guard struct {
	log     *slog.Logger
	base    context.Context
	tls     *tls.Config
	auditor *audit.Auditor // nil: no auditing
	limiter *fairness.Limiter
	flow    FlowControl          // nil: no seats
	maxWait time.Duration        // of a request in a queue
	certs   *certreload.Reloader // nil: Deps.TLS's certificates

	mu   sync.Mutex // guards stop
	stop func()     // set by Start, cleared by Close
}

// New builds audit, fairness and the serving TLS configuration.
func New(cfg Config, d Deps) (*Guard, error) {
	if d.TLS == nil || d.Base == nil || d.Logger == nil || d.Metrics == nil {
		return nil, errors.New("cannot make gateway guard: TLS, Base, Logger and Metrics are required")
	}
	g := &Guard{log: d.Logger, base: d.Base, flow: d.FlowControl}
	tlsCfg, certs, err := servingTLS(d.TLS, cfg.ServingTLS, d.Logger)
	if err == nil {
		err = withRequestHeaderCAs(tlsCfg, cfg.RequestHeaderClientCAFile)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	g.tls, g.certs = tlsCfg, certs
	if a := cfg.Audit; a.PolicyFile != "" {
		ac := audit.Config{
			PolicyFile: a.PolicyFile, Path: a.LogPath, MaxSizeMB: a.LogMaxSizeMB, MaxBackups: a.LogMaxBackups, MaxAgeDays: a.LogMaxAgeDays,
			Buffer: a.Buffer, Logger: d.Logger.With("component", "audit"), Metrics: d.Metrics,
		}
		if a.NATSSubject != "" {
			ac.NATS, ac.Subject = d.NATS, a.NATSSubject
		}
		if g.auditor, err = audit.New(ac); err != nil {
			return nil, fmt.Errorf("cannot make gateway: %w", err)
		}
	}
	l := cfg.Limits
	g.maxWait = l.QueueMaxWait
	if g.maxWait <= 0 {
		g.maxWait = DefaultQueueMaxWait
	}
	if g.limiter, err = fairness.New(fairness.Config{
		UserQPS: l.UserQPS, UserBurst: l.UserBurst, MaxWatchesPerUser: l.MaxWatchesPerUser,
		ListBytesPerSecond: l.ListBytesPerSecond, ListBytesBurst: l.ListBytesBurst, ListMaxWait: l.ListMaxWait,
		Metrics: d.Metrics,
	}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	return g, nil
}

// TLS is the serving configuration: Deps.TLS with the reloading
// certificate, the TLS versions and suites, and the front proxies' CAs.
func (g *Guard) TLS() *tls.Config { return g.tls }

// withRequestHeaderCAs adds the request-header CAs to the client CAs the
// TLS handshake advertises, when it advertises some: a Go client (and
// most others) sends only a certificate issued by one of them, so a
// front proxy's would never arrive.
func withRequestHeaderCAs(c *tls.Config, caFile string) error {
	if caFile == "" || c.ClientCAs == nil {
		return nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("cannot read request-header client CA file: %w", err)
	}
	pool := c.ClientCAs.Clone()
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("cannot parse request-header client CA file %s: no certificates", caFile)
	}
	c.ClientCAs = pool
	return nil
}

// servingTLS clones base with the reloading certificate, the minimum
// version and the cipher suites.
func servingTLS(base *tls.Config, o ServingTLSConfig, log *slog.Logger) (*tls.Config, *certreload.Reloader, error) {
	c := base.Clone()
	switch o.MinVersion {
	case "", "VersionTLS12":
		c.MinVersion = max(c.MinVersion, tls.VersionTLS12)
	case "VersionTLS13":
		c.MinVersion = tls.VersionTLS13
	default:
		return nil, nil, fmt.Errorf("unsupported TLS minimum version %q (VersionTLS12 or VersionTLS13)", o.MinVersion)
	}
	if len(o.CipherSuites) > 0 {
		ids, err := CipherSuites(o.CipherSuites)
		if err != nil {
			return nil, nil, err
		}
		c.CipherSuites = ids
	}
	if o.CertFile == "" && o.KeyFile == "" {
		return c, nil, nil
	}
	r, err := certreload.New(certreload.Config{CertFile: o.CertFile, KeyFile: o.KeyFile, Interval: o.ReloadInterval, Logger: log.With("component", "certreload")})
	if err != nil {
		return nil, nil, err
	}
	c.Certificates, c.GetCertificate = nil, r.GetCertificate
	return c, r, nil
}

// CipherSuites maps crypto/tls cipher suite names (kube-apiserver's
// --tls-cipher-suites values) to their IDs.
func CipherSuites(names []string) ([]uint16, error) {
	known := map[string]uint16{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[s.Name] = s.ID
	}
	ids := make([]uint16, 0, len(names))
	for _, n := range names {
		id, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("unknown TLS cipher suite %q", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Start starts the audit writer and the certificate reloader; Close
// stops them, once the server has stopped.
func (g *Guard) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if a := g.auditor; a != nil {
		wg.Go(a.Run)
	}
	if r := g.certs; r != nil {
		wg.Go(func() { r.Run(ctx) })
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stop = func() {
		cancel()
		if a := g.auditor; a != nil {
			if err := a.Close(true); err != nil {
				g.log.Warn("cannot close audit log", "err", err)
			}
		}
		wg.Wait()
	}
}

// Close stops what Start started and waits for it; the audit log is
// flushed. Close without Start, or twice, does nothing.
func (g *Guard) Close() {
	g.mu.Lock()
	stop := g.stop
	g.stop = nil
	g.mu.Unlock()
	if stop != nil {
		stop()
	}
}
