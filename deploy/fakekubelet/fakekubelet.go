// Package fakekubelet is a small kubelet for tests: HTTPS on loopback
// with its own CA, requiring the API server's kubelet client certificate,
// serving /healthz, /containerLogs (follow streams lines as the test sends
// them), /exec and /attach (kubelet's own remotecommand server from
// k8s.io/cri-streaming, SPDY and WebSocket v1–v4: "echo" prints its
// arguments, "cat" copies stdin), /portForward (an echo service on
// every port) and /metrics/resource (the node's and its containers' CPU
// and memory in the kubelet's Prometheus text format, as metrics-server
// scrapes it, at the rates the test sets with SetUsage). It records the
// headers of every request it serves, so tests can check what a proxy
// forwarded.
package fakekubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// Kubelet is a running fake kubelet.
type Kubelet struct {
	pki  *PKI
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
	// Follow carries the lines a following log request writes after the
	// configured ones.
	Follow chan string
	logs   []string
	meter  *meter

	mu   sync.Mutex // guards seen
	seen []Request
}

// Request is what the kubelet saw of one request.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	// ClientCN is the common name of the client certificate.
	ClientCN string
}

// Start serves a fake kubelet on 127.0.0.1 (a free port) with the
// certificates of pki; logs are the lines every container's log starts
// with.
func Start(pki *PKI, logs ...string) (*Kubelet, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen: %w", err)
	}
	k := &Kubelet{pki: pki, ln: ln, done: make(chan struct{}), Follow: make(chan string), logs: logs, meter: newMeter(time.Now)}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/containerLogs/{ns}/{pod}/{container}", k.serveLogs)
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", k.serveExec)
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", k.serveAttach)
	mux.HandleFunc("/portForward/{ns}/{pod}", k.servePortForward)
	mux.HandleFunc("GET /metrics/resource", k.serveResourceMetrics)
	k.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k.record(r)
			mux.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pki.serving},
			ClientCAs:    pki.pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			NextProtos:   []string{"http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(k.done)
		_ = k.srv.ServeTLS(ln, "", "")
	}()
	return k, nil
}

// Port is the port the kubelet listens on.
func (k *Kubelet) Port() int { return k.ln.Addr().(*net.TCPAddr).Port }

// Close stops the kubelet and waits for it.
func (k *Kubelet) Close() error {
	err := k.srv.Close()
	<-k.done
	return err
}

// Requests returns what the kubelet saw, in order.
func (k *Kubelet) Requests() []Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Request(nil), k.seen...)
}

func (k *Kubelet) record(r *http.Request) {
	req := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		req.ClientCN = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	k.mu.Lock()
	k.seen = append(k.seen, req)
	k.mu.Unlock()
}

func (k *Kubelet) serveLogs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	f, _ := w.(http.Flusher)
	for _, l := range k.logs {
		_, _ = io.WriteString(w, l+"\n")
	}
	if f != nil {
		f.Flush()
	}
	if r.URL.Query().Get("follow") != "true" {
		return
	}
	for {
		select {
		case l := <-k.Follow:
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		case <-r.Context().Done():
			return
		}
	}
}

const idle, creation = time.Minute, 30 * time.Second

func (k *Kubelet) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeExec(w, r, runtime{}, r.PathValue("pod"), "", r.PathValue("container"), r.URL.Query()["command"],
		opts, idle, creation, remotecommandconsts.SupportedStreamingProtocols)
}

func (k *Kubelet) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeAttach(w, r, runtime{}, r.PathValue("pod"), "", r.PathValue("container"),
		opts, idle, creation, remotecommandconsts.SupportedStreamingProtocols)
}

func (k *Kubelet) servePortForward(w http.ResponseWriter, r *http.Request) {
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		// SPDY requests carry their ports in stream headers.
		opts = &portforward.V4Options{}
	}
	portforward.ServePortForward(w, r, runtime{}, r.PathValue("pod"), "", opts, idle, creation, portforward.SupportedProtocols)
}

// runtime is the containers: exec runs echo or cat, attach copies stdin
// to stdout, every port echoes what it receives.
type runtime struct{}

func (runtime) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	switch cmd[0] {
	case "echo":
		_, err := io.WriteString(out, strings.Join(cmd[1:], " ")+"\n")
		return err
	case "cat":
		if in == nil {
			return nil
		}
		_, err := io.Copy(out, in)
		return err
	}
	return fmt.Errorf("%s: command not found", cmd[0])
}

func (runtime) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	if in == nil || out == nil {
		return nil
	}
	_, err := io.Copy(out, in)
	return err
}

func (runtime) PortForward(ctx context.Context, _, _ string, _ int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	_, err := io.Copy(stream, stream)
	return err
}

// ClientCAs is the pool the kubelet verifies clients against.
func (p *PKI) ClientCAs() *x509.CertPool { return p.pool }
