package gateway

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/guard"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/rest"
)

// HeaderAuditID is the request and response header carrying a request's
// audit ID, as kube-apiserver's.
const HeaderAuditID = rest.HeaderAuditID

// writeError is the one place an error becomes the Status a client sees.
func (g *Gateway) writeError(rc *fasthttp.RequestCtx, info *requestinfo.Info, err error) {
	var st *metav1.Status
	if errors.Is(err, rest.ErrNotFoundPath) {
		st = &apierror.NotFound(schema.GroupResource{}, "").ErrStatus
		st.Message = "the server could not find the requested resource"
		st.Details = nil
	} else {
		name := info.Name
		if n, ok := rest.ObjectName(err); ok {
			name = n
		}
		st = apierror.Status(err, schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, name)
	}
	if st.Code >= 500 {
		g.log.Error("request failed", "method", string(rc.Method()), "path", string(rc.Path()), "code", st.Code, "err", err)
	}
	g.writeStatus(rc, st)
	// After writeStatus, which resets the response and its headers.
	if secs, ok := apierror.RetryAfter(st); ok {
		rc.Response.Header.Set("Retry-After", strconv.Itoa(secs))
	}
}

func (g *Gateway) writeStatus(rc *fasthttp.RequestCtx, st *metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	body, err := g.codec.Encode(st, negotiate.JSON, false)
	if err != nil {
		body = []byte(fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"code":500}`, err.Error()))
		st.Code = 500
	}
	rc.Response.Reset()
	rc.Response.Header.Set(HeaderAuditID, guard.AuditID(rc))
	rc.SetStatusCode(int(st.Code))
	rc.SetContentType(negotiate.MediaJSON)
	rc.SetBody(body)
}

// maxDrain bounds how much of an oversized body is read and thrown away so
// its client can read the 413; past it the connection is just closed.
const maxDrain = 64 << 20

// drainIdle is how long draining waits for the next bytes of a body: a
// client that sent only headers (or stalled) gets its answer after it.
// Near the end of a body of known length the wait is short: what is left
// may already sit in fasthttp's read buffer.
const (
	drainIdle = time.Second
	drainTail = 50 * time.Millisecond
	readBuf   = 4096 // fasthttp's default read buffer
)

// drain reads and discards an oversized body of length n (-1: unknown)
// while its client keeps sending, up to maxDrain.
func drain(conn net.Conn, n int) {
	defer conn.SetReadDeadline(time.Time{})
	buf := make([]byte, 32<<10)
	for total := 0; total < maxDrain; {
		idle := drainIdle
		if n >= 0 && total >= n-readBuf {
			idle = drainTail
		}
		_ = conn.SetReadDeadline(time.Now().Add(idle))
		k, err := conn.Read(buf)
		total += k
		if err != nil {
			return
		}
	}
}

// readError answers requests fasthttp could not read: too large a body is
// 413 as kube-apiserver answers it, anything else 400.
func (g *Gateway) readError(rc *fasthttp.RequestCtx, err error) {
	var st *metav1.Status
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		// fasthttp refused the body from its Content-Length without
		// reading it. Closing on an unread body would reset the
		// connection before the client reads the Status: drain it first.
		drain(rc.Conn(), rc.Request.Header.ContentLength())
		rc.SetConnectionClose()
		st = &apierror.RequestEntityTooLarge(int64(g.cfg.MaxRequestBodyBytes)).ErrStatus
	} else {
		st = &apierror.BadRequest(fmt.Sprintf("cannot read request: %v", err)).ErrStatus
	}
	g.writeStatus(rc, st)
	g.metrics.Observe(rc, &requestinfo.Info{}, int(st.Code), 0)
}
