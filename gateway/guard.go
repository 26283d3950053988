package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/audit"
	"github.com/kgate/kgate/gateway/internal/certreload"
	"github.com/kgate/kgate/gateway/internal/fairness"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/rest"
)

// AuditConfig are kube-apiserver's --audit-* options.
type AuditConfig struct {
	// PolicyFile (--audit-policy-file) turns auditing on.
	PolicyFile string
	// LogPath (--audit-log-path) is the JSON-lines file; "-" is stdout.
	LogPath string
	// LogMaxSizeMB, LogMaxBackups, LogMaxAgeDays rotate it.
	LogMaxSizeMB, LogMaxBackups, LogMaxAgeDays int
	// NATSSubject also publishes each event on Config.NATS.
	NATSSubject string
	// Buffer bounds the events waiting for the sinks (default 10000);
	// past it events are dropped and counted.
	Buffer int
}

// LimitsConfig are the fairness limits (see fairness.Config); zero
// disables each.
type LimitsConfig struct {
	// MaxRequestsInflight and MaxMutatingRequestsInflight cap each
	// priority level (system, workload); watches are not counted.
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// UserQPS and UserBurst: each user's token bucket.
	UserQPS   float64
	UserBurst int
	// MaxWatchesPerUser caps each user's concurrent watches.
	MaxWatchesPerUser int
	// ListBytesPerSecond is each user's budget of bytes returned by LISTs;
	// ListBytesBurst how far it may run ahead; ListMaxWait how long a
	// LIST waits for a budget in debt before 429.
	ListBytesPerSecond int64
	ListBytesBurst     int64
	ListMaxWait        time.Duration
}

// ServingTLSConfig refines Config.TLS.
type ServingTLSConfig struct {
	// CertFile and KeyFile, when set, are loaded and watched: a replaced
	// pair is served to new connections without a restart.
	CertFile, KeyFile string
	// ReloadInterval is how often the files are checked (default 5s).
	ReloadInterval time.Duration
	// MinVersion is VersionTLS12 (the default and the floor) or
	// VersionTLS13 (--tls-min-version).
	MinVersion string
	// CipherSuites are crypto/tls names of the TLS 1.2 suites to offer
	// (--tls-cipher-suites); default Go's.
	CipherSuites []string
}

// guardState is what runs between authentication and authorization.
type guardState struct {
	auditor *audit.Auditor       // nil: no auditing
	limiter *fairness.Limiter    // nil: no limits
	certs   *certreload.Reloader // nil: Config.TLS's certificates
}

// newGuard builds audit, fairness and the serving TLS configuration.
func (g *Gateway) newGuard() error {
	cfg := &g.cfg
	tlsCfg, certs, err := servingTLS(cfg.TLS, cfg.ServingTLS, g)
	if err == nil {
		err = withRequestHeaderCAs(tlsCfg, cfg.RequestHeader.ClientCAFile)
	}
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	cfg.TLS, g.guard.certs = tlsCfg, certs
	if a := cfg.Audit; a.PolicyFile != "" {
		ac := audit.Config{
			PolicyFile: a.PolicyFile, Path: a.LogPath, MaxSizeMB: a.LogMaxSizeMB, MaxBackups: a.LogMaxBackups, MaxAgeDays: a.LogMaxAgeDays,
			Buffer: a.Buffer, Logger: cfg.Logger.With("component", "audit"), Metrics: cfg.Metrics,
		}
		if a.NATSSubject != "" {
			ac.NATS, ac.Subject = cfg.NATS, a.NATSSubject
		}
		if g.guard.auditor, err = audit.New(ac); err != nil {
			return fmt.Errorf("cannot make gateway: %w", err)
		}
	}
	l := cfg.Limits
	if g.guard.limiter, err = fairness.New(fairness.Config{
		MaxInflight: l.MaxRequestsInflight, MaxMutatingInflight: l.MaxMutatingRequestsInflight,
		UserQPS: l.UserQPS, UserBurst: l.UserBurst, MaxWatchesPerUser: l.MaxWatchesPerUser,
		ListBytesPerSecond: l.ListBytesPerSecond, ListBytesBurst: l.ListBytesBurst, ListMaxWait: l.ListMaxWait,
		Metrics: cfg.Metrics,
	}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	return nil
}

// servingTLS clones base with the reloading certificate, the minimum
// version and the cipher suites.
func servingTLS(base *tls.Config, o ServingTLSConfig, g *Gateway) (*tls.Config, *certreload.Reloader, error) {
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
	r, err := certreload.New(certreload.Config{CertFile: o.CertFile, KeyFile: o.KeyFile, Interval: o.ReloadInterval, Logger: g.cfg.Logger.With("component", "certreload")})
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

// startGuard starts the audit writer and the certificate reloader; the
// function it returns stops them once the server has stopped.
func (g *Gateway) startGuard() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if a := g.guard.auditor; a != nil {
		wg.Go(a.Run)
	}
	if r := g.guard.certs; r != nil {
		wg.Go(func() { r.Run(ctx) })
	}
	return func() {
		cancel()
		if a := g.guard.auditor; a != nil {
			if err := a.Close(true); err != nil {
				g.cfg.Logger.Warn("cannot close audit log", "err", err)
			}
		}
		wg.Wait()
	}
}

type guardKey struct{}

// requestGuard follows one request from admission to its last byte.
type requestGuard struct {
	user     user.Info
	decision audit.Decision
	event    auditv1.Event // the request-wide fields; nil User.Username: not audited
	ticket   *fairness.Ticket
	panicked bool
}

// guardRequest runs after authentication: it writes RequestReceived
// and applies the fairness limits (429 with Retry-After over a limit).
// finishRequest completes what it started.
func (g *Gateway) guardRequest(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) error {
	rg := &requestGuard{user: u}
	rc.SetUserValue(guardKey{}, rg)
	if a := g.guard.auditor; a != nil {
		rg.decision = a.Evaluate(&authorizer.AttributesRecord{
			User: u, Verb: info.Verb, Namespace: info.Namespace, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
			Resource: info.Resource, Subresource: info.Subresource, Name: info.Name,
			ResourceRequest: info.IsResourceRequest, Path: info.Path,
		})
		if rg.decision.Level != auditv1.LevelNone {
			rg.event = newEvent(rc, info, u, rg.decision)
			g.emit(rg, auditv1.StageRequestReceived, nil)
		}
	}
	t, err := g.guard.limiter.Admit(&fairness.Request{
		User: u.GetName(), Groups: u.GetGroups(), Verb: info.Verb,
		APIGroup: info.APIGroup, Resource: info.Resource, Subresource: info.Subresource,
	})
	var rej *fairness.Rejected
	if errors.As(err, &rej) {
		return apierror.TooManyRequests(rej.Message, rej.RetryAfter)
	}
	if err != nil {
		return err
	}
	rg.ticket = t
	return nil
}

// guardPanic marks the request as ended by a panic (audit stage Panic).
func (g *Gateway) guardPanic(rc *fasthttp.RequestCtx) {
	if rg, _ := rc.UserValue(guardKey{}).(*requestGuard); rg != nil {
		rg.panicked = true
	}
}

// finishRequest runs once the handler is done: it frees the in-flight
// slot, charges a LIST's bytes and writes ResponseComplete (or Panic).
// A watch handed to its stream writes ResponseStarted now and
// ResponseComplete, freeing its watch slot, when the connection closes.
func (g *Gateway) finishRequest(rc *fasthttp.RequestCtx, info *requestinfo.Info) {
	rg, _ := rc.UserValue(guardKey{}).(*requestGuard)
	if rg == nil {
		return
	}
	if eu := rest.User(rc); eu != nil && eu.GetName() != rg.user.GetName() && rg.event.User.Username != "" {
		rg.event.ImpersonatedUser = userInfo(eu)
	}
	if rc.Hijacked() {
		if rg.ticket != nil {
			rg.ticket.Done(info.Verb, 0)
		}
		st := &metav1.Status{Code: 200}
		g.emit(rg, auditv1.StageResponseStarted, st)
		if !onClose(rc.Conn(), func() {
			if rg.ticket != nil {
				rg.ticket.EndWatch()
			}
			g.emit(rg, auditv1.StageResponseComplete, st)
		}) && rg.ticket != nil {
			rg.ticket.EndWatch()
		}
		return
	}
	if rg.ticket != nil {
		rg.ticket.Done(info.Verb, len(rc.Response.Body()))
		rg.ticket.EndWatch()
	}
	if rg.event.User.Username == "" {
		return
	}
	code := rc.Response.StatusCode()
	st := &metav1.Status{Code: int32(code)}
	if code >= 300 {
		var body metav1.Status
		if json.Unmarshal(rc.Response.Body(), &body) == nil && body.Kind == "Status" {
			st = &metav1.Status{Status: body.Status, Message: body.Message, Reason: body.Reason, Code: body.Code}
		}
	} else if rg.decision.Response() && isJSON(rc.Response.Header.ContentType()) && json.Valid(rc.Response.Body()) {
		rg.event.ResponseObject = &runtime.Unknown{Raw: rc.Response.Body(), ContentType: runtime.ContentTypeJSON}
	}
	stage := auditv1.StageResponseComplete
	if rg.panicked {
		stage = auditv1.StagePanic
	}
	g.emit(rg, stage, st)
	rg.event.ResponseObject = nil
}

// emit writes the request's event at stage unless the policy omits it.
// The event is encoded before emit returns: it may point into rc.
func (g *Gateway) emit(rg *requestGuard, stage auditv1.Stage, st *metav1.Status) {
	if rg.event.User.Username == "" || !rg.decision.Logs(stage) {
		return
	}
	ev := rg.event
	ev.Stage, ev.StageTimestamp, ev.ResponseStatus = stage, metav1.NowMicro(), st
	g.guard.auditor.Emit(&ev)
}

func newEvent(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info, d audit.Decision) auditv1.Event {
	id := string(rc.Request.Header.Peek("Audit-ID"))
	if id == "" {
		id = uuid.NewString()
	}
	ev := auditv1.Event{
		Level: d.Level, AuditID: types.UID(id), RequestURI: string(rc.RequestURI()), Verb: info.Verb,
		User: *userInfo(u), SourceIPs: []string{rc.RemoteIP().String()}, UserAgent: string(rc.UserAgent()),
		RequestReceivedTimestamp: metav1.NowMicro(),
	}
	if ev.User.Username == "" {
		ev.User.Username = user.Anonymous
	}
	if info.IsResourceRequest {
		ev.ObjectRef = &auditv1.ObjectReference{
			Resource: info.Resource, Namespace: info.Namespace, Name: info.Name,
			APIGroup: info.APIGroup, APIVersion: info.APIVersion, Subresource: info.Subresource,
		}
	}
	if body := rc.Request.Body(); d.Request() && len(body) > 0 && isJSON(rc.Request.Header.ContentType()) && json.Valid(body) {
		// Copied: the event outlives the request when it is a watch.
		ev.RequestObject = &runtime.Unknown{Raw: bytes.Clone(body), ContentType: runtime.ContentTypeJSON}
	}
	return ev
}

func userInfo(u user.Info) *authnv1.UserInfo {
	ui := &authnv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		ui.Extra = make(map[string]authnv1.ExtraValue, len(extra))
		for k, v := range extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

func isJSON(contentType []byte) bool { return bytes.Contains(contentType, []byte("json")) }

// trackConns wraps a listener's connections so that the end of a
// hijacked one (a watch) can be seen: fasthttp closes it when the stream
// is done.
func trackConns(ln net.Listener) net.Listener { return trackListener{ln} }

type trackListener struct{ net.Listener }

func (l trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c}, nil
}

type trackedConn struct {
	net.Conn
	mu     sync.Mutex // guards hooks and closed
	hooks  []func()
	closed bool
}

func (c *trackedConn) Close() error {
	c.mu.Lock()
	hooks, first := c.hooks, !c.closed
	c.hooks, c.closed = nil, true
	c.mu.Unlock()
	err := c.Conn.Close()
	if first {
		for _, f := range hooks {
			f()
		}
	}
	return err
}

// onClose runs f when conn (or the connection under its TLS) closes; it
// reports false when conn is not tracked.
func onClose(conn net.Conn, f func()) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	t, ok := conn.(*trackedConn)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		go f()
		return true
	}
	t.hooks = append(t.hooks, f)
	return true
}
