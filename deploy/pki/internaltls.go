package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// ErrIdentity: a peer of the internal plane presented a certificate from
// the internal CA but not of a role allowed here.
var ErrIdentity = errors.New("pki: peer identity not allowed")

// InternalTLS is one role's side of the internal plane's mutual TLS: the
// internal CA and the role's certificate.
type InternalTLS struct {
	roots *x509.CertPool
	cert  tls.Certificate
}

// LoadInternalTLS reads the internal CA bundle and a role's certificate
// and key.
func LoadInternalTLS(caFile, certFile, keyFile string) (*InternalTLS, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read internal CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cannot load internal CA %s: %w", caFile, errNoCertificates)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load internal certificate: %w", err)
	}
	return &InternalTLS{roots: roots, cert: cert}, nil
}

// LoadRoleTLS loads role's side from the files EnsureInternal wrote.
func (in *Internal) LoadRoleTLS(role string) (*InternalTLS, error) {
	f, err := in.Role(role)
	if err != nil {
		return nil, err
	}
	return LoadInternalTLS(in.CAFile, f.CertFile, f.KeyFile)
}

// Roots is the internal CA pool.
func (t *InternalTLS) Roots() *x509.CertPool { return t.roots }

// Server is a server's configuration: clients must present a certificate
// from the internal CA naming one of roles (IdentityURI); others fail the
// handshake.
func (t *InternalTLS) Server(roles ...string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    t.roots,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
		VerifyConnection: func(cs tls.ConnectionState) error {
			return allowed(cs.PeerCertificates, roles)
		},
	}
}

// Client is a client's configuration toward a server of one of roles: it
// presents the role's certificate and accepts a server certificate from
// the internal CA naming one of roles, whatever address it was reached at
// (peers are authorized by identity, not host name).
func (t *InternalTLS) Client(roles ...string) *tls.Config {
	roots := t.roots
	return &tls.Config{
		Certificates: []tls.Certificate{t.cert},
		MinVersion:   tls.VersionTLS12,
		// The chain and the identity are checked by VerifyConnection:
		// the host name is not what identifies a peer here.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("cannot verify internal peer: %w: no certificate", ErrIdentity)
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}); err != nil {
				return fmt.Errorf("cannot verify internal peer: %w", err)
			}
			return allowed(cs.PeerCertificates, roles)
		},
	}
}

// HostClient is a client's configuration toward a server verified by host
// name (NATS, etcd), presenting the role's certificate.
func (t *InternalTLS) HostClient() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{t.cert}, RootCAs: t.roots, MinVersion: tls.VersionTLS12}
}

// allowed fails unless the leaf of chain names one of roles.
func allowed(chain []*x509.Certificate, roles []string) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: no certificate", ErrIdentity)
	}
	for _, u := range chain[0].URIs {
		for _, r := range roles {
			if u.String() == IdentityURI(r) {
				return nil
			}
		}
	}
	names := make([]string, len(chain[0].URIs))
	for i, u := range chain[0].URIs {
		names[i] = u.String()
	}
	return fmt.Errorf("%w: %q is none of %v", ErrIdentity, names, slices.Clone(roles))
}
