package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	authnv1 "k8s.io/api/authentication/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kgate/kgate/gateway/internal/apf"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/audit"
	"github.com/kgate/kgate/gateway/internal/fairness"
	"github.com/kgate/kgate/gateway/internal/latency"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/rest"
)

type guardKey struct{}

// requestGuard follows one request from admission to its last byte.
type requestGuard struct {
	user     user.Info
	decision audit.Decision
	audited  bool          // event is written at the stages the policy logs
	event    auditv1.Event // the request-wide fields
	ticket   *fairness.Ticket
	class    *apf.Decision // nil: not classified
	wait     waitContext   // what Admit waits in
	panicked bool
}

// Audit evaluates the audit policy for a request that needs no admission
// (a health probe) and writes RequestReceived; Finish writes the later
// stages.
func (g *Guard) Audit(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) {
	g.startAudit(rc, info, u)
}

// startAudit evaluates the audit policy for the request and writes
// RequestReceived; Finish writes the later stages.
func (g *Guard) startAudit(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) *requestGuard {
	rg := &requestGuard{user: u}
	rc.SetUserValue(guardKey{}, rg)
	if a := g.auditor; a != nil {
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

// Unauthenticated records a request that failed authentication, as
// kube-apiserver does: one event at ResponseStarted, with no user and the
// 401 it gets.
func (g *Guard) Unauthenticated(rc *fasthttp.RequestCtx, info *requestinfo.Info) {
	a := g.auditor
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

// Admit runs after authentication: it writes RequestReceived, applies
// the per-user limits, then runs next on the seats API Priority and
// Fairness gives the request's priority level: a request over them waits
// in its flow's queue until seats free, the client goes away or the
// gateway shuts down; 429 with Retry-After over a limit. Exempt and
// long-running requests (watches once started) run at once. Finish
// completes what Admit started.
func (g *Guard) Admit(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info, next func() error) error {
	rg := g.startAudit(rc, info, u)
	queued := time.Now()
	rg.wait = waitContext{base: g.base, conn: rc.Conn(), deadline: queued.Add(g.maxWait)}
	t, err := g.limiter.Admit(&fairness.Request{
		User: u.GetName(), Groups: u.GetGroups(), Verb: info.Verb, APIGroup: info.APIGroup, Resource: info.Resource,
	})
	if err != nil {
		rg.wait.stop()
		var rej *fairness.Rejected
		if errors.As(err, &rej) {
			return apierror.TooManyRequests(rej.Message, rej.RetryAfter)
		}
		return err
	}
	rg.ticket = t
	longRunning := apf.LongRunning(info)
	run := func() error {
		// Long-running requests are not counted in flight, as upstream.
		if !longRunning && info.Verb != "watch" {
			defer g.limiter.Executing(info.Verb)()
		}
		return next()
	}
	if g.flow == nil || longRunning {
		rg.wait.stop()
		return run()
	}
	var nextErr error
	d := g.flow.Handle(&rg.wait, apf.Request{Info: info, User: u, Query: string(rc.QueryArgs().QueryString()), Queued: rg.wait.watch}, func() {
		rg.wait.stop()
		// Time in a queue is not the server's: kube-apiserver's SLI
		// latency leaves it out.
		latency.From(rc).Since(queued)
		nextErr = run()
	})
	rg.wait.stop()
	rg.class = &d
	if !d.Executed {
		latency.From(rc).Since(queued)
		g.limiter.RejectedByPriorityAndFairness()
		return apierror.TooManyRequests("Too many requests, please try again later.", max(d.RetryAfter, 1))
	}
	return nextErr
}

// Panic marks the request as ended by a panic (audit stage Panic).
func (g *Guard) Panic(rc *fasthttp.RequestCtx) {
	if rg, _ := rc.UserValue(guardKey{}).(*requestGuard); rg != nil {
		rg.panicked = true
	}
}

// Finish runs once the handler is done: it frees the in-flight
// slot, charges a LIST's bytes and writes ResponseComplete (or Panic).
// A watch handed to its stream writes ResponseStarted now and
// ResponseComplete, freeing its watch slot, when the connection closes.
func (g *Guard) Finish(rc *fasthttp.RequestCtx, info *requestinfo.Info) {
	rg, _ := rc.UserValue(guardKey{}).(*requestGuard)
	if rg == nil {
		return
	}
	if eu := rest.User(rc); eu != nil && rg.user != nil && eu.GetName() != rg.user.GetName() && rg.audited {
		rg.event.ImpersonatedUser = userInfo(eu)
	}
	if rc.Hijacked() {
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
	if c := rg.class; c != nil && c.FlowSchemaUID != "" {
		// kube-apiserver's Priority and Fairness headers; here, after any
		// Status was written (which resets the headers). Watches go
		// without them: their stream writes its own headers.
		rc.Response.Header.Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, string(c.FlowSchemaUID))
		rc.Response.Header.Set(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID, string(c.PriorityLevelUID))
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
func (g *Guard) emit(rg *requestGuard, stage auditv1.Stage, st *metav1.Status) {
	if !rg.audited || !rg.decision.Logs(stage) {
		return
	}
	ev := rg.event
	ev.Stage, ev.StageTimestamp, ev.ResponseStatus = stage, metav1.NowMicro(), st
	g.auditor.Emit(&ev)
}

// newEvent is the request-wide part of the request's audit event; u is
// nil for a request that failed authentication.
func newEvent(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info, d audit.Decision) auditv1.Event {
	ev := auditv1.Event{
		Level: d.Level, AuditID: types.UID(AuditID(rc)), RequestURI: string(rc.RequestURI()), Verb: info.Verb,
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
