package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	// Queues, HandSize, QueueLengthLimit and QueueMaxWait shape the fair
	// queues requests over the in-flight limits wait in (kube-apiserver's
	// API Priority and Fairness): each user is dealt HandSize of each
	// pool's Queues and waits in the shortest, at most QueueMaxWait; a
	// full queue (QueueLengthLimit) or the wait running out is 429. Zero:
	// 64, 8, 50 and 15s.
	Queues           int
	HandSize         int
	QueueLengthLimit int
	QueueMaxWait     time.Duration
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
		Queues: l.Queues, HandSize: l.HandSize, QueueLengthLimit: l.QueueLengthLimit, MaxWait: l.QueueMaxWait,
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
	audited  bool          // event is written at the stages the policy logs
	event    auditv1.Event // the request-wide fields
	ticket   *fairness.Ticket
	level    *fairness.PriorityLevel // nil: not classified
	wait     waitContext             // what Admit waits in
	panicked bool
}

// startAudit evaluates the audit policy for the request and writes
// RequestReceived; finishRequest writes the later stages.
func (g *Gateway) startAudit(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) *requestGuard {
	rg := &requestGuard{user: u}
	rc.SetUserValue(guardKey{}, rg)
	if a := g.guard.auditor; a != nil {
		rg.decision = a.Evaluate(auditAttributes(info, u))
		if rg.decision.Level != auditv1.LevelNone {
			rg.audited = true
			rg.event = newEvent(rc, info, u, rg.decision)
			g.emit(rg, auditv1.StageRequestReceived, nil)
		}
	}
	return rg
}

func auditAttributes(info *requestinfo.Info, u user.Info) *authorizer.AttributesRecord {
	return &authorizer.AttributesRecord{
		User: u, Verb: info.Verb, Namespace: info.Namespace, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
		Resource: info.Resource, Subresource: info.Subresource, Name: info.Name,
		ResourceRequest: info.IsResourceRequest, Path: info.Path,
	}
}

// auditUnauthenticated records a request that failed authentication, as
// kube-apiserver does: one event at ResponseStarted, with no user and the
// 401 it gets.
func (g *Gateway) auditUnauthenticated(rc *fasthttp.RequestCtx, info *requestinfo.Info) {
	a := g.guard.auditor
	if a == nil {
		return
	}
	if requestinfo.Parse(info, string(rc.Method()), string(rc.Path()), rc.QueryArgs()) != nil {
		*info = requestinfo.Info{Path: string(rc.Path()), Verb: strings.ToLower(string(rc.Method()))}
	}
	d := a.Evaluate(auditAttributes(info, nil))
	if !d.Logs(auditv1.StageResponseStarted) {
		return
	}
	rg := &requestGuard{decision: d, audited: true, event: newEvent(rc, info, nil, d)}
	rg.event.RequestObject = nil
	g.emit(rg, auditv1.StageResponseStarted, &metav1.Status{
		Status: metav1.StatusFailure, Code: fasthttp.StatusUnauthorized, Reason: metav1.StatusReasonUnauthorized,
		Message: "Authentication failed",
	})
}

// guardRequest runs after authentication: it writes RequestReceived
// and applies the fairness limits: a request over the in-flight limit
// of its priority level waits in a fair queue until a seat frees, the
// client goes away or the gateway shuts down; 429 with Retry-After over
// a limit. finishRequest completes what it started.
func (g *Gateway) guardRequest(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) error {
	rg := g.startAudit(rc, info, u)
	rg.wait = waitContext{base: g.base, conn: rc.Conn()}
	t, err := g.guard.limiter.Admit(&rg.wait, &fairness.Request{
		User: u.GetName(), Groups: u.GetGroups(), Verb: info.Verb,
		APIGroup: info.APIGroup, Resource: info.Resource, Subresource: info.Subresource,
	})
	rg.wait.stop()
	var rej *fairness.Rejected
	if errors.As(err, &rej) {
		rg.level = rej.Level
		return apierror.TooManyRequests(rej.Message, rej.RetryAfter)
	}
	if err != nil {
		return err
	}
	rg.ticket, rg.level = t, t.Level
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
	if eu := rest.User(rc); eu != nil && rg.user != nil && eu.GetName() != rg.user.GetName() && rg.audited {
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
	if rg.level != nil {
		// kube-apiserver's Priority and Fairness headers; here, after any
		// Status was written (which resets the headers). Watches go
		// without them: their stream writes its own headers.
		rc.Response.Header.Set("X-Kubernetes-PF-FlowSchema-UID", rg.level.FlowSchemaUID)
		rc.Response.Header.Set("X-Kubernetes-PF-PriorityLevel-UID", rg.level.UID)
	}
	if !rg.audited {
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
	if !rg.audited || !rg.decision.Logs(stage) {
		return
	}
	ev := rg.event
	ev.Stage, ev.StageTimestamp, ev.ResponseStatus = stage, metav1.NowMicro(), st
	g.guard.auditor.Emit(&ev)
}

// newEvent is the request-wide part of the request's audit event; u is
// nil for a request that failed authentication.
func newEvent(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info, d audit.Decision) auditv1.Event {
	ev := auditv1.Event{
		Level: d.Level, AuditID: types.UID(auditID(rc)), RequestURI: string(rc.RequestURI()), Verb: info.Verb,
		SourceIPs: []string{rc.RemoteIP().String()}, UserAgent: string(rc.UserAgent()),
		RequestReceivedTimestamp: metav1.NowMicro(),
	}
	if u != nil {
		ev.User = *userInfo(u)
		if ev.User.Username == "" {
			ev.User.Username = user.Anonymous
		}
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

type auditIDKey struct{}

// HeaderAuditID is the request and response header carrying a request's
// audit ID, as kube-apiserver's.
const HeaderAuditID = rest.HeaderAuditID

// maxAuditIDLen bounds an audit ID a client sends; a longer one (or one
// with characters outside printable ASCII) is replaced by a new UUID.
const maxAuditIDLen = 128

// auditID is the request's audit ID: the client's Audit-ID header when it
// sent a sane one, else a new UUID. It is chosen once per request.
func auditID(rc *fasthttp.RequestCtx) string {
	if id, ok := rc.UserValue(auditIDKey{}).(string); ok {
		return id
	}
	id := string(rc.Request.Header.Peek(HeaderAuditID))
	if !validAuditID(id) {
		id = uuid.NewString()
	}
	rc.SetUserValue(auditIDKey{}, id)
	return id
}

func validAuditID(id string) bool {
	if id == "" || len(id) > maxAuditIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
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
