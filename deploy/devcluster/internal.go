package devcluster

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/storage/embedded"
)

// internalPlane is what each part of the cluster needs of the internal
// plane's security; all zero (plaintext, no credentials) when
// InsecureInternal.
type internalPlane struct {
	etcdServer *embedded.ClientTLS
	etcdClient *tls.Config // the cache-node certificate: etcd only checks the CA
	natsServer *tls.Config
	natsUsers  []natsembed.User
	natsCreds  map[string]natsauth.Credentials // by role
	roles      map[string]*pki.InternalTLS     // by role
	readServer *tls.Config                     // cache nodes: gateways and cache nodes only
	readClient *tls.Config                     // gateways: to cache nodes
	gossipKeys [][]byte
}

// startInternal makes or loads the internal plane's files and builds the
// configurations from them.
func (c *Cluster) startInternal() error {
	cfg := c.cfg
	if cfg.InsecureInternal {
		cfg.Logger.Warn("the internal plane is insecure: etcd, NATS, the cache nodes' read API and gossip run in plaintext without credentials (--insecure-internal)")
		return nil
	}
	if sub := cfg.Audit.NATSSubject; sub != "" && !natsauth.AuditAllowed(sub) {
		return fmt.Errorf("cannot use audit NATS subject %q: gateways may publish audit events only on %s and below it", sub, natsauth.AuditSubject)
	}
	dir := cfg.InternalDir
	if dir == "" {
		dir = filepath.Join(cfg.DataDir, "internal")
	}
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: dir})
	if err != nil {
		return fmt.Errorf("cannot make the internal plane's certificates: %w", err)
	}
	c.Internal = in
	p := &c.internal
	p.roles = map[string]*pki.InternalTLS{}
	p.natsCreds = map[string]natsauth.Credentials{}
	for _, role := range []string{pki.RoleGateway, pki.RoleCacheNode} {
		if p.roles[role], err = in.LoadRoleTLS(role); err != nil {
			return err
		}
		f, _ := in.Role(role) // a known role
		creds, err := natsauth.ReadFile(f.NATSCredentialsFile)
		if err != nil {
			return err
		}
		perms, _ := natsauth.For(role) // a known role
		p.natsCreds[role] = creds
		p.natsUsers = append(p.natsUsers, natsembed.User{Name: creds.User, Password: creds.Password, Publish: perms.Publish, Subscribe: perms.Subscribe})
	}
	natsCert, err := tls.LoadX509KeyPair(in.NATSServerCertFile, in.NATSServerKeyFile)
	if err != nil {
		return fmt.Errorf("cannot load the NATS server certificate: %w", err)
	}
	p.natsServer = &tls.Config{Certificates: []tls.Certificate{natsCert}, MinVersion: tls.VersionTLS12}
	p.etcdServer = &embedded.ClientTLS{CertFile: in.EtcdServerCertFile, KeyFile: in.EtcdServerKeyFile, TrustedCAFile: in.CAFile}
	p.etcdClient = p.roles[pki.RoleCacheNode].HostClient()
	p.readServer = p.roles[pki.RoleCacheNode].Server(pki.RoleGateway, pki.RoleCacheNode)
	p.readClient = p.roles[pki.RoleGateway].Client(pki.RoleCacheNode)
	if p.gossipKeys, err = cluster.ReadKeyFile(in.ClusterKeyFile); err != nil {
		return err
	}
	return nil
}

// natsOptions are the NATS client options of role: its credentials, and
// TLS trusting the internal CA.
func (p *internalPlane) natsOptions(role string) []nats.Option {
	if p.roles == nil {
		return nil
	}
	creds := p.natsCreds[role]
	// The TLS handshake and the password check take longer than NATS's
	// default 2s connect timeout on a loaded test machine.
	return []nats.Option{nats.UserInfo(creds.User, creds.Password), nats.Secure(p.roles[role].HostClient()), nats.Timeout(10 * time.Second)}
}

// NATSURL is the embedded NATS server's client URL (tls:// unless the
// internal plane is insecure).
func (c *Cluster) NATSURL() string { return c.nats.ClientURL() }

// EtcdEndpoints are the embedded etcd's client URLs (https:// unless the
// internal plane is insecure).
func (c *Cluster) EtcdEndpoints() []string { return c.etcd.Endpoints() }
