// Package devserver runs `kgate dev` as a child process for the harness:
// a fresh data directory, a free loopback port, and a wait for /readyz.
// The process is separate so that its CPU and RSS can be sampled alone.
package devserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config starts a kgate dev.
type Config struct {
	// Bin is the kgate binary (required).
	Bin string
	// DataDir is kgate's data directory; empty makes a temporary one that
	// Close removes.
	DataDir string
	// Log receives kgate's stdout and stderr (nil: kept in memory only,
	// shown in start errors).
	Log io.Writer
	// StartTimeout bounds the start until /readyz answers ok (default 90s).
	StartTimeout time.Duration
}

// Server is a running kgate dev.
type Server struct {
	// Addr is the gateway's host:port, Kubeconfig the admin kubeconfig.
	Addr, Kubeconfig string
	// Pid is the process (gateway, cache node, embedded etcd and NATS).
	Pid int
	// EtcdEndpoints are the embedded etcd's client URLs, read from the log;
	// EtcdTLS is the client certificate (the gateway's internal one from
	// <data-dir>/internal) that etcd requires, nil if kgate dev left it
	// off.
	EtcdEndpoints []string
	EtcdTLS       *tls.Config

	cmd     *exec.Cmd
	dir     string // kgate's --data-dir
	tmpDir  string // dir when Close removes it
	out     *buffer
	exited  chan struct{} // closed once cmd exited
	waitErr error         // set before exited is closed
}

var (
	servingRE = regexp.MustCompile(`(?m)^kgate is serving on (\S+)$`)
	etcdRE    = regexp.MustCompile(`msg="etcd started" endpoints=\[([^\]]*)\]`)
)

// Start runs kgate dev and returns once /readyz answers ok.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Bin == "" {
		return nil, errors.New("devserver: Bin is required")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var s *Server
		if s, err = start(ctx, cfg); err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, err
}

var errPortTaken = errors.New("port taken")

func start(ctx context.Context, cfg Config) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: addr, out: &buffer{}, exited: make(chan struct{})}
	dir := cfg.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "kgate-bench-"); err != nil {
			return nil, err
		}
		s.tmpDir = dir
	}
	s.dir = dir
	var out io.Writer = s.out
	if cfg.Log != nil {
		out = io.MultiWriter(s.out, cfg.Log)
	}
	s.cmd = exec.Command(cfg.Bin, "dev", "--data-dir", dir, "--listen", addr)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		s.removeTmp()
		return nil, fmt.Errorf("cannot run %s: %w", cfg.Bin, err)
	}
	s.Pid = s.cmd.Process.Pid
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, cfg.StartTimeout); err != nil {
		s.Close()
		if strings.Contains(s.out.String(), "address already in use") {
			return nil, fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return nil, err
	}
	if m := etcdRE.FindStringSubmatch(s.out.String()); m != nil {
		s.EtcdEndpoints = strings.Fields(m[1])
	}
	internal := filepath.Join(dir, "internal")
	if _, err := os.Stat(filepath.Join(internal, "ca.crt")); err == nil {
		info := transport.TLSInfo{
			TrustedCAFile: filepath.Join(internal, "ca.crt"),
			CertFile:      filepath.Join(internal, "gateway.crt"), KeyFile: filepath.Join(internal, "gateway.key"),
		}
		if s.EtcdTLS, err = info.ClientConfig(); err != nil {
			s.Close()
			return nil, fmt.Errorf("cannot load kgate dev's etcd client certificate: %w", err)
		}
	}
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var client *http.Client
	var host string
	var last error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("kgate dev exited (%v):\n%s", s.waitErr, tail(s.out.String(), 40))
		case <-ctx.Done():
			return fmt.Errorf("kgate dev not ready within %s (%v):\n%s", timeout, last, tail(s.out.String(), 40))
		case <-time.After(100 * time.Millisecond):
		}
		if client == nil {
			if servingRE.FindString(s.out.String()) == "" {
				continue
			}
			rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.dir, "kubeconfig"))
			if err != nil {
				last = err
				continue
			}
			if client, err = rest.HTTPClientFor(rc); err != nil {
				return fmt.Errorf("cannot build a client from kgate's kubeconfig: %w", err)
			}
			host = strings.TrimSuffix(rc.Host, "/")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && bytes.Equal(bytes.TrimSpace(b), []byte("ok")) {
			return nil
		}
		last = fmt.Errorf("/readyz: %s %q", resp.Status, b)
	}
}

// Close stops kgate (SIGTERM, then SIGKILL after 15s) and removes a
// temporary data directory.
func (s *Server) Close() error {
	defer s.removeTmp()
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("kgate dev did not stop within 15s of SIGTERM; killed")
	}
	var ee *exec.ExitError
	if s.waitErr != nil && !errors.As(s.waitErr, &ee) {
		return s.waitErr
	}
	return nil
}

func (s *Server) removeTmp() {
	if s.tmpDir != "" {
		os.RemoveAll(s.tmpDir)
		s.tmpDir = ""
	}
}

// Exited is closed when the process has exited (stopped by Close or not).
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Output is what kgate printed so far.
func (s *Server) Output() string { return s.out.String() }

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("cannot find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// buffer keeps the process's latest output (up to maxBuffer bytes), safe
// for its writers and readers.
type buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

const maxBuffer = 1 << 20

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len()+len(p) > maxBuffer {
		keep := b.b.Bytes()[b.b.Len()/2:]
		b.b = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
