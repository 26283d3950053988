package kubeletproxy

import (
	"context"
	"io"
	"net"
	"net/url"

	"github.com/valyala/fasthttp"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/utils/ptr"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/hijackhttp"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/stream"
)

// serveLog serves pods/log as upstream's LogREST: options validated,
// the kubelet's containerLogs URL from pod.LogLocation, read through
// upstream's LocationStreamer (its response checker turns the kubelet's
// errors into Statuses). The kubelet is asked before the connection is
// hijacked, so a failure is an ordinary Status; the log is then streamed
// in chunks as it comes, without buffering.
func (p *Proxy) serveLog(ctx context.Context, rc *fasthttp.RequestCtx, info *requestinfo.Info, query url.Values) error {
	opts := &api.PodLogOptions{}
	if err := p.decode(query, opts); err != nil {
		return err
	}
	split := utilfeature.DefaultFeatureGate.Enabled(features.PodLogsQuerySplitStreams)
	if split && opts.Stream == nil {
		opts.Stream = ptr.To(api.LogStreamAll)
	}
	if errs := validation.ValidatePodLogOptions(opts, split); len(errs) > 0 {
		return apierror.Invalid(api.Kind("PodLogOptions"), info.Name, errs)
	}
	loc, rt, err := pod.LogLocation(ctx, podGetter{p}, p.conns, info.Name, opts)
	if err != nil {
		return err
	}
	if loc == nil {
		// A pod not yet scheduled has no log: upstream answers an empty
		// one.
		rc.SetContentType("text/plain")
		return nil
	}
	streamer := &genericrest.LocationStreamer{
		Location:        loc,
		Transport:       rt,
		ContentType:     "text/plain",
		Flush:           opts.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(api.Resource("pods/log"), info.Name),
		RedirectChecker: genericrest.PreventRedirects,
	}
	sctx, cancel := context.WithCancel(p.base)
	if p.cfg.MaxSession > 0 {
		var c2 context.CancelFunc
		sctx, c2 = context.WithTimeout(sctx, p.cfg.MaxSession)
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	body, _, contentType, err := streamer.InputStream(sctx, "v1", string(rc.Request.Header.Peek("Accept")))
	if err != nil {
		cancel()
		return err
	}
	auditID := string(rc.Response.Header.Peek(hijackhttp.HeaderAuditID))
	rc.HijackSetNoResponse(true)
	p.srv.Sessions.Admit()
	rc.Hijack(func(c net.Conn) {
		raw := hijackhttp.RawConn(c) // closed to cut the stream at shutdown
		p.srv.Sessions.Attach(raw)
		defer p.srv.Sessions.End(raw)
		defer cancel()
		defer body.Close()
		p.streamLog(sctx, cancel, c, body, contentType, auditID)
	})
	return nil
}

// streamLog copies the kubelet's log to the client as chunks, until
// either side ends or the gateway shuts down.
func (p *Proxy) streamLog(ctx context.Context, cancel context.CancelFunc, c net.Conn, body io.Reader, contentType, auditID string) {
	hs := []stream.Header{{Name: "Content-Type", Value: contentType}}
	if auditID != "" {
		hs = append(hs, stream.Header{Name: hijackhttp.HeaderAuditID, Value: auditID})
	}
	s, err := stream.Start(c, p.cfg.WriteTimeout, hs...)
	if err != nil {
		return
	}
	defer s.Close()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		// The client leaving or the shutdown ends the kubelet request,
		// which ends the blocked Read below.
		select {
		case <-s.Gone():
			cancel()
		case <-ctx.Done():
		case <-stopped:
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if rerr != nil {
			return
		}
	}
}
