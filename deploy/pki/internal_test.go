package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"

	"slices"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/natsauth"
)

func TestEnsureInternal(t *testing.T) {
	dir := t.TempDir()
	in, err := EnsureInternal(InternalConfig{Dir: dir, Hosts: []string{"127.0.0.1", "nats.kgate.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Written) != 13 { // CA, 4 pairs, 2 credentials, 1 key file
		t.Errorf("Written = %d files %v, want 13", len(in.Written), in.Written)
	}
	for _, role := range []string{RoleGateway, RoleCacheNode} {
		f, err := in.Role(role)
		if err != nil {
			t.Fatal(err)
		}
		cert := readCert(t, f.CertFile)
		if len(cert.URIs) != 1 || cert.URIs[0].String() != IdentityURI(role) {
			t.Errorf("%s: URIs = %v", role, cert.URIs)
		}
		c, err := natsauth.ReadFile(f.NATSCredentialsFile)
		if err != nil || c.User != role || len(c.Password) < 32 {
			t.Errorf("%s: credentials = %+v, %v", role, c, err)
		}
		if st, err := os.Stat(f.KeyFile); err != nil || st.Mode().Perm() != keyFileMode {
			t.Errorf("%s: key file mode = %v, %v", role, st.Mode(), err)
		}
	}
	if n := readCert(t, in.NATSServerCertFile).DNSNames; !slices.Equal(n, []string{"nats.kgate.svc"}) {
		t.Errorf("NATS server DNS names = %v", n)
	}
	// NATS routes and etcd peers present their server certificate as a
	// client certificate to each other.
	for _, f := range []string{in.NATSServerCertFile, in.EtcdServerCertFile} {
		want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		if u := readCert(t, f).ExtKeyUsage; !slices.Equal(u, want) {
			t.Errorf("%s: extended key usages %v, want %v", f, u, want)
		}
	}
	if keys, err := cluster.ReadKeyFile(in.ClusterKeyFile); err != nil || len(keys) != 1 || len(keys[0]) != 32 {
		t.Errorf("cluster keys = %d, %v", len(keys), err)
	}

	// A second run keeps everything.
	again, err := EnsureInternal(InternalConfig{Dir: dir, Hosts: []string{"127.0.0.1", "nats.kgate.svc"}})
	if err != nil || len(again.Written) != 0 {
		t.Fatalf("second EnsureInternal wrote %v, %v", again.Written, err)
	}
	// New hosts: new server certificates, the same CA, passwords and key.
	moved, err := EnsureInternal(InternalConfig{Dir: dir, Hosts: []string{"10.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range moved.Written {
		if f == in.CAFile || f == in.ClusterKeyFile || f == in.Gateway.NATSCredentialsFile {
			t.Errorf("new hosts rewrote %s", f)
		}
	}
	if len(moved.Written) != 8 {
		t.Errorf("new hosts wrote %v, want the 4 certificate pairs", moved.Written)
	}
	// Near expiry: everything is renewed but the passwords and the key.
	late, err := EnsureInternal(InternalConfig{Dir: dir, Hosts: []string{"10.0.0.1"}, Now: func() time.Time { return time.Now().Add(leafValidity - renewBefore/2) }})
	if err != nil || len(late.Written) != 8 {
		t.Fatalf("near expiry wrote %v, %v; want the 4 leaf pairs", late.Written, err)
	}
}

func readCert(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return parseCert(t, b)
}

// TestInternalTLS: a server accepting gateways lets a gateway in and
// refuses a client without a certificate, one of another role and one
// from another CA; a client refuses a server of another CA or role.
func TestInternalTLS(t *testing.T) {
	in, err := EnsureInternal(InternalConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := EnsureInternal(InternalConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	load := func(in *Internal, role string) *InternalTLS {
		l, err := in.LoadRoleTLS(role)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	node, gw, cn := load(in, RoleCacheNode), load(in, RoleGateway), load(in, RoleCacheNode)
	foreignGW, foreignNode := load(other, RoleGateway), load(other, RoleCacheNode)

	serve := func(cfg *tls.Config) string {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					if c.(*tls.Conn).Handshake() == nil {
						_, _ = c.Write([]byte("ok"))
					}
				}()
			}
		}()
		return ln.Addr().String()
	}
	// dial reports whether a handshake and a read succeeded.
	dial := func(addr string, cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		if err == nil && string(b) != "ok" {
			err = errors.New("no answer")
		}
		return err
	}
	gatewaysOnly := serve(node.Server(RoleGateway))
	both := serve(node.Server(RoleGateway, RoleCacheNode))
	foreign := serve(foreignNode.Server(RoleGateway))

	noCert := gw.Client(RoleCacheNode)
	noCert.Certificates = nil
	f := func(name, addr string, cfg *tls.Config, ok bool) {
		t.Run(name, func(t *testing.T) {
			err := dial(addr, cfg)
			if ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !ok && err == nil {
				t.Fatal("accepted")
			}
		})
	}
	f("gateway to a node accepting gateways", gatewaysOnly, gw.Client(RoleCacheNode), true)
	f("cache node to a node accepting both", both, cn.Client(RoleCacheNode), true)
	f("cache node to a node accepting gateways only", gatewaysOnly, cn.Client(RoleCacheNode), false)
	f("no client certificate", gatewaysOnly, noCert, false)
	f("gateway of another CA", gatewaysOnly, foreignGW.Client(RoleCacheNode), false)
	f("server of another CA", foreign, gw.Client(RoleCacheNode), false)
	f("server of an unexpected role", both, gw.Client(RoleGateway), false)
	f("plain TLS client trusting the CA", gatewaysOnly, &tls.Config{RootCAs: gw.Roots(), ServerName: "127.0.0.1"}, false)
}
