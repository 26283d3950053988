// Package health serves a cache node's probes and metrics over plain
// HTTP: /livez (the process answers), /readyz (every range it reflects
// synced and not found different from etcd; ?verbose lists each range)
// and /metrics (Prometheus text).
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures a Server.
type Config struct {
	// Listen is the host:port to serve on; required (port 0 picks one).
	Listen string
	// Ready reports whether the node serves every range it reflects;
	// required (cachenode.Node.Ready).
	Ready func() bool
	// Gatherer serves /metrics; required.
	Gatherer prometheus.Gatherer
	// Checks, when set, are more /readyz checks (cachenode.Node.Checks:
	// one per range), each listed by /readyz?verbose; any failing one
	// fails /readyz.
	Checks func() []Check
}

// Check is one named readiness check and its result.
type Check struct {
	Name string
	Err  error // nil: ok
}

// Server is the probes and metrics server.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// New opens the listener; Run serves.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" || cfg.Ready == nil || cfg.Gatherer == nil {
		return nil, errors.New("cannot make health server: Listen, Ready and Gatherer are required")
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.Listen, err)
	}
	return &Server{ln: ln, srv: &http.Server{Handler: Handler(cfg.Ready, cfg.Checks, cfg.Gatherer), ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Handler serves /livez, /readyz (with ?verbose, one line per check as
// kube-apiserver prints them) and /metrics. checks may be nil.
func Handler(ready func() bool, checks func() []Check, g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) {
		all := []Check{{Name: "ranges"}}
		if !ready() {
			all[0].Err = errors.New("not synced")
		}
		if checks != nil {
			all = append(all, checks()...)
		}
		var b strings.Builder
		failed := false
		for _, c := range all {
			if c.Err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, c.Err)
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
			}
		}
		_, verbose := req.URL.Query()["verbose"]
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, b.String()+"readyz check failed\n")
		case verbose:
			fmt.Fprint(w, b.String()+"readyz check passed\n")
		default:
			fmt.Fprint(w, "ok")
		}
	})
	return mux
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then closes the server.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("cannot serve health: %w", err)
	case <-ctx.Done():
	}
	s.Close()
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cannot serve health: %w", err)
	}
	return nil
}

// Close stops serving (and closes the listener of a server that never
// ran).
func (s *Server) Close() error {
	err := s.srv.Close()
	s.ln.Close()
	return err
}
