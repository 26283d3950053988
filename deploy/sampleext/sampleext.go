// Package sampleext runs Kubernetes' own example of an extension API
// server, k8s.io/sample-apiserver's wardle server (group
// wardle.example.com: flunders and fischers), in the calling process on
// loopback, as the extension server of an end-to-end test of kgate's
// aggregation: it authenticates and authorizes by delegation to kgate
// (TokenReview, SubjectAccessReview), trusts kgate's front-proxy
// certificate from kgate's kube-system/extension-apiserver-authentication
// ConfigMap, and keeps its objects in an etcd of the caller's.
package sampleext

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/component-base/compatibility"
	"k8s.io/sample-apiserver/pkg/cmd/server"

	"github.com/kgate/kgate/deploy/testca"
)

// Group and Version are what the wardle server serves.
const (
	Group   = "wardle.example.com"
	Version = "v1alpha1"
)

// ServiceNamespace and ServiceName are the Service its APIService names;
// ServingName is the name its serving certificate is for, as kgate's
// proxy checks it (<service>.<namespace>.svc).
const (
	ServiceNamespace = "wardle"
	ServiceName      = "api"
	ServingName      = ServiceName + "." + ServiceNamespace + ".svc"
)

// PKI is what the wardle server and kgate need to trust each other.
type PKI struct {
	// ServingCA is the APIService's caBundle.
	ServingCA []byte
	// ServingCertFile, ServingKeyFile: the wardle server's.
	ServingCertFile, ServingKeyFile string
	// FrontProxyCAFile is kgate's --requestheader-client-ca-file.
	FrontProxyCAFile string
	// ProxyClientCertFile, ProxyClientKeyFile: kgate's
	// --proxy-client-cert-file and --proxy-client-key-file (CN
	// FrontProxyName, kgate's --requestheader-allowed-names).
	ProxyClientCertFile, ProxyClientKeyFile string
}

// FrontProxyName is the front-proxy client certificate's CN.
const FrontProxyName = "front-proxy-client"

// NewPKI makes the certificates and writes the files into dir.
func NewPKI(dir string) (*PKI, error) {
	serving, err := testca.New("wardle-serving-ca")
	if err != nil {
		return nil, err
	}
	front, err := testca.New("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	servCert, servKey, err := serving.Server("wardle", ServingName, "localhost", "127.0.0.1")
	if err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := front.Client(FrontProxyName)
	if err != nil {
		return nil, err
	}
	p := &PKI{
		ServingCA:        serving.PEM,
		ServingCertFile:  filepath.Join(dir, "wardle.crt"),
		ServingKeyFile:   filepath.Join(dir, "wardle.key"),
		FrontProxyCAFile: filepath.Join(dir, "front-proxy-ca.crt"), ProxyClientCertFile: filepath.Join(dir, "front-proxy-client.crt"),
		ProxyClientKeyFile: filepath.Join(dir, "front-proxy-client.key"),
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{p.ServingCertFile, servCert}, {p.ServingKeyFile, servKey},
		{p.FrontProxyCAFile, front.PEM}, {p.ProxyClientCertFile, proxyCert}, {p.ProxyClientKeyFile, proxyKey},
	} {
		if err := os.WriteFile(f.name, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("cannot write %s: %w", f.name, err)
		}
	}
	return p, nil
}

// Config is one wardle server.
type Config struct {
	PKI *PKI
	// Kubeconfig reaches kgate as a user allowed to review tokens and
	// access, read the authentication ConfigMap and watch namespaces
	// (the admin's).
	Kubeconfig string
	// EtcdServers keep the flunders and fischers.
	EtcdServers []string
	// Out receives the server's log; nil discards it.
	Out io.Writer
}

// Server is a running wardle server.
type Server struct {
	port   int
	cancel context.CancelFunc
	done   chan error
}

// Start starts the server on a free loopback port and waits until it
// answers /healthz.
func Start(cfg Config) (*Server, error) {
	if cfg.PKI == nil || cfg.Kubeconfig == "" || len(cfg.EtcdServers) == 0 {
		return nil, errors.New("cannot start the wardle server: PKI, Kubeconfig and EtcdServers are required")
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := server.NewWardleServerOptions(out, out)
	// A registry of its own for each server: the default one is
	// process-wide and takes wardle's feature gate only once.
	opts.ComponentGlobalsRegistry = compatibility.NewComponentGlobalsRegistry()
	cmd := server.NewCommandStartWardleServer(ctx, opts, false)
	cmd.SetOut(out)
	cmd.SetErr(out)
	cmd.SetArgs([]string{
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + cfg.PKI.ServingCertFile, "--tls-private-key-file=" + cfg.PKI.ServingKeyFile,
		"--etcd-servers=" + strings.Join(cfg.EtcdServers, ","),
		"--kubeconfig=" + cfg.Kubeconfig,
		"--authentication-kubeconfig=" + cfg.Kubeconfig, "--authorization-kubeconfig=" + cfg.Kubeconfig,
	})
	s := &Server{port: port, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- cmd.Execute() }()
	if err := s.waitHealthy(cfg.PKI.ServingCA, time.Minute); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// Port is the server's port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Stop stops the server and waits until it has.
func (s *Server) Stop() error {
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("the wardle server ended: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		return errors.New("cannot stop the wardle server: still running after a minute")
	}
}

// waitHealthy polls /healthz until it answers 200, the server ends or
// within passes.
func (s *Server) waitHealthy(ca []byte, within time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: ServingName, MinVersion: tls.VersionTLS12},
	}}
	defer client.CloseIdleConnections()
	url := "https://127.0.0.1:" + strconv.Itoa(s.port) + "/healthz"
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err // for Stop
			return fmt.Errorf("the wardle server ended before it was healthy: %v", err)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		time.Sleep(200 * time.Millisecond) // a process starting: nothing to wait on but its port
	}
	return fmt.Errorf("the wardle server is not healthy after %v: %v", within, last)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
