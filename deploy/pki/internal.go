package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/natsauth"
)

// Roles of the internal plane, as named in certificates (IdentityURI) and
// in NATS users.
const (
	RoleGateway   = natsauth.RoleGateway
	RoleCacheNode = natsauth.RoleCacheNode
)

// IdentityURI is the SAN URI naming a role in its internal certificate,
// "spiffe://kgate/<role>". The internal plane authorizes peers by it, not
// by host name: pods come and go under addresses nobody knows in advance.
func IdentityURI(role string) string { return "spiffe://kgate/" + role }

// File names inside InternalConfig.Dir.
const (
	InternalCAFileName     = "ca.crt"
	InternalCAKeyFileName  = "ca.key"
	NATSServerName         = "nats-server"
	EtcdServerName         = "etcd-server"
	ClusterKeyFileName     = "cluster.key"
	natsCredentialsPattern = "nats-%s.creds"
)

// InternalConfig says where the internal plane's files live and which
// hosts its servers (NATS, etcd) answer on.
type InternalConfig struct {
	// Dir holds all files; created (0700) if missing. Required.
	Dir string
	// Hosts are the IP addresses and DNS names of the NATS and etcd
	// server certificates (and of the role certificates, for tools that
	// check host names). Default: 127.0.0.1, ::1, localhost.
	Hosts []string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// RoleFiles are a role's certificate, key and NATS credentials.
type RoleFiles struct {
	CertFile string
	KeyFile  string
	// NATSCredentialsFile holds "user:password" (natsauth.Parse).
	NATSCredentialsFile string
}

// Internal is the internal plane's files: one CA, a client-and-server
// certificate per role, server certificates for NATS and etcd, NATS
// credentials per role and the gossip keyring.
type Internal struct {
	CAFile             string
	Gateway, CacheNode RoleFiles
	NATSServerCertFile string
	NATSServerKeyFile  string
	EtcdServerCertFile string
	EtcdServerKeyFile  string
	// ClusterKeyFile is the gossip keyring (cluster.ReadKeyFile).
	ClusterKeyFile string
	// Written lists the files this call (re)wrote.
	Written []string
}

// Role returns the files of role.
func (in *Internal) Role(role string) (RoleFiles, error) {
	switch role {
	case RoleGateway:
		return in.Gateway, nil
	case RoleCacheNode:
		return in.CacheNode, nil
	}
	return RoleFiles{}, fmt.Errorf("%w: unknown role %q", ErrInvalidConfig, role)
}

// EnsureInternal makes sure cfg.Dir holds the internal plane's files and
// returns their paths, as Ensure does for the serving side: what is valid
// is kept byte for byte (so every process started from the same directory
// agrees), what is missing, expiring within 30 days or not from the CA is
// made again; a new CA means new certificates. NATS passwords and the
// gossip key are made once and kept. Keys and credentials are 0600.
func EnsureInternal(cfg InternalConfig) (*Internal, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	}
	if len(cfg.Hosts) == 0 {
		cfg.Hosts = defaultHosts()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := validateHosts(cfg.Hosts); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, dirMode); err != nil {
		return nil, fmt.Errorf("cannot create directory: %w", err)
	}
	p := func(name string) string { return filepath.Join(cfg.Dir, name) }
	in := &Internal{
		CAFile:             p(InternalCAFileName),
		NATSServerCertFile: p(NATSServerName + ".crt"), NATSServerKeyFile: p(NATSServerName + ".key"),
		EtcdServerCertFile: p(EtcdServerName + ".crt"), EtcdServerKeyFile: p(EtcdServerName + ".key"),
		ClusterKeyFile: p(ClusterKeyFileName),
	}
	for _, r := range []struct {
		role string
		f    *RoleFiles
	}{{RoleGateway, &in.Gateway}, {RoleCacheNode, &in.CacheNode}} {
		*r.f = RoleFiles{CertFile: p(r.role + ".crt"), KeyFile: p(r.role + ".key"), NATSCredentialsFile: p(fmt.Sprintf(natsCredentialsPattern, r.role))}
	}
	now := cfg.Now()
	caKeyFile := p(InternalCAKeyFileName)
	ca, err := loadKeyPair(in.CAFile, caKeyFile)
	if err == nil {
		err = checkCA(ca, now)
	}
	fresh := err != nil
	if fresh {
		tmpl := caTemplate(now)
		tmpl.Subject = pkix.Name{CommonName: internalCACommonName}
		if ca, err = newKeyPair(tmpl, nil); err != nil {
			return nil, fmt.Errorf("cannot create internal CA: %w", err)
		}
		if err := in.writePair(ca, in.CAFile, caKeyFile); err != nil {
			return nil, err
		}
	}
	leaves := []struct {
		certFile, keyFile string
		tmpl              *x509.Certificate
	}{
		{in.Gateway.CertFile, in.Gateway.KeyFile, roleTemplate(now, RoleGateway, cfg.Hosts)},
		{in.CacheNode.CertFile, in.CacheNode.KeyFile, roleTemplate(now, RoleCacheNode, cfg.Hosts)},
		{in.NATSServerCertFile, in.NATSServerKeyFile, peerTemplate(now, NATSServerName, cfg.Hosts)},
		{in.EtcdServerCertFile, in.EtcdServerKeyFile, peerTemplate(now, EtcdServerName, cfg.Hosts)},
	}
	for _, l := range leaves {
		if !fresh {
			kp, err := loadKeyPair(l.certFile, l.keyFile)
			if err == nil && checkInternalLeaf(kp, ca, l.tmpl, now) == nil {
				continue
			}
		}
		kp, err := newKeyPair(l.tmpl, ca)
		if err != nil {
			return nil, fmt.Errorf("cannot create internal certificate %s: %w", l.certFile, err)
		}
		if err := in.writePair(kp, l.certFile, l.keyFile); err != nil {
			return nil, err
		}
	}
	for _, r := range []struct{ role, file string }{{RoleGateway, in.Gateway.NATSCredentialsFile}, {RoleCacheNode, in.CacheNode.NATSCredentialsFile}} {
		if c, err := natsauth.ReadFile(r.file); err == nil && c.User == r.role {
			continue
		}
		pass, err := randomHex(24)
		if err != nil {
			return nil, err
		}
		if err := in.write(r.file, natsauth.Credentials{User: r.role, Password: pass}.Format(), keyFileMode); err != nil {
			return nil, err
		}
	}
	if _, err := cluster.ReadKeyFile(in.ClusterKeyFile); err != nil {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("cannot generate cluster key: %w", err)
		}
		if err := in.write(in.ClusterKeyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), keyFileMode); err != nil {
			return nil, err
		}
	}
	return in, nil
}

const internalCACommonName = "kgate-internal-ca"

// roleTemplate is a role's certificate: client and server, named by
// IdentityURI(role) (and hosts, for tools that check them).
func roleTemplate(now time.Time, role string, hosts []string) *x509.Certificate {
	t := serverTemplate(now, "kgate-"+role, hosts)
	t.Subject.OrganizationalUnit = []string{role}
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	u, _ := url.Parse(IdentityURI(role)) // a constant form: cannot fail
	t.URIs = []*url.URL{u}
	return t
}

// serverTemplate is a server certificate for hosts.
func serverTemplate(now time.Time, cn string, hosts []string) *x509.Certificate {
	t := servingTemplate(now, hosts)
	t.Subject = pkix.Name{CommonName: cn}
	return t
}

// peerTemplate is a server certificate that also authenticates its
// server to the others of its kind: NATS routes and etcd peers connect
// to each other with it, and both require a client certificate there
// (nats-server always does on routes; etcd with --peer-client-cert-auth).
func peerTemplate(now time.Time, cn string, hosts []string) *x509.Certificate {
	t := serverTemplate(now, cn, hosts)
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return t
}

// checkInternalLeaf fails unless kp is fresh, from ca, and has want's
// names and usages.
func checkInternalLeaf(kp, ca *keyPair, want *x509.Certificate, now time.Time) error {
	for _, u := range want.ExtKeyUsage {
		if err := checkLeaf(kp, ca, u, now); err != nil {
			return err
		}
	}
	c := kp.cert
	if c.Subject.CommonName != want.Subject.CommonName ||
		!slices.Equal(c.DNSNames, want.DNSNames) ||
		!slices.EqualFunc(c.IPAddresses, want.IPAddresses, net.IP.Equal) ||
		!slices.EqualFunc(c.URIs, want.URIs, func(a, b *url.URL) bool { return a.String() == b.String() }) {
		return fmt.Errorf("%w: names of %s changed", errStale, c.Subject.CommonName)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("cannot generate password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func (in *Internal) writePair(kp *keyPair, certFile, keyFile string) error {
	if err := in.write(keyFile, kp.keyPEM, keyFileMode); err != nil {
		return err
	}
	return in.write(certFile, kp.certPEM, certFileMode)
}

func (in *Internal) write(name string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := writeAtomic(name, data, mode); err != nil {
		return err
	}
	in.Written = append(in.Written, name)
	return nil
}
