package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/deploy/pki"
)

// internalFlags close the internal plane of the production roles: mutual
// TLS of the cache nodes' read API, NATS credentials and TLS, the gossip
// keyring and etcd's client TLS. Without them a role refuses to start
// unless --insecure-internal says plaintext is meant.
type internalFlags struct {
	caFile, certFile, keyFile *string
	natsCredentials           *string
	clusterKeyFile            *string
	etcdCA, etcdCert, etcdKey *string
	insecure                  *bool
}

func addInternalFlags(fs *flag.FlagSet) internalFlags {
	return internalFlags{
		caFile:          fs.String("internal-ca-file", "", "CA bundle of the internal plane (kgate pki --internal-dir): verifies cache nodes, gateways and the NATS server"),
		certFile:        fs.String("internal-cert-file", "", "this role's internal certificate (spiffe://kgate/<role>): presented to cache nodes, served by a cache node's read API, presented to NATS"),
		keyFile:         fs.String("internal-key-file", "", "key of --internal-cert-file"),
		natsCredentials: fs.String("nats-credentials-file", "", `this role's NATS credentials, one "user:password" line`),
		clusterKeyFile:  fs.String("cluster-key-file", "", "gossip keyring: one base64 AES key (16, 24 or 32 bytes) per line, the first encrypts; add a key second, then move it first, then drop the old one to rotate without downtime"),
		etcdCA:          fs.String("etcd-cafile", "", "CA bundle verifying etcd's serving certificate"),
		etcdCert:        fs.String("etcd-certfile", "", "client certificate presented to etcd"),
		etcdKey:         fs.String("etcd-keyfile", "", "key of --etcd-certfile"),
		insecure:        fs.Bool("insecure-internal", false, "run the internal plane (read API, NATS, gossip) in plaintext without credentials; for a trusted network only"),
	}
}

// internalPlane is what the flags resolve to; zero when insecure.
type internalPlane struct {
	role       *pki.InternalTLS
	natsOpts   []nats.Option
	gossipKeys [][]byte
	etcdTLS    *tls.Config
}

// resolve loads the files of role; with --insecure-internal it logs a
// warning and returns an empty plane (etcd TLS still applies: it is the
// etcd operator's choice).
func (f internalFlags) resolve(role string, log *slog.Logger) (*internalPlane, error) {
	p := &internalPlane{}
	var err error
	if *f.etcdCA != "" || *f.etcdCert != "" || *f.etcdKey != "" {
		if (*f.etcdCert == "") != (*f.etcdKey == "") {
			return nil, errors.New("--etcd-certfile and --etcd-keyfile go together")
		}
		info := transport.TLSInfo{CertFile: *f.etcdCert, KeyFile: *f.etcdKey, TrustedCAFile: *f.etcdCA}
		if p.etcdTLS, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("cannot load etcd client TLS: %w", err)
		}
	}
	given := *f.caFile != "" || *f.certFile != "" || *f.keyFile != "" || *f.natsCredentials != "" || *f.clusterKeyFile != ""
	if *f.insecure {
		if given {
			return nil, errors.New("--insecure-internal contradicts --internal-*, --nats-credentials-file and --cluster-key-file")
		}
		log.Warn("the internal plane is insecure: the read API, NATS and gossip run in plaintext without credentials (--insecure-internal)")
		return p, nil
	}
	if *f.caFile == "" || *f.certFile == "" || *f.keyFile == "" || *f.natsCredentials == "" || *f.clusterKeyFile == "" {
		return nil, errors.New("the internal plane needs --internal-ca-file, --internal-cert-file, --internal-key-file, --nats-credentials-file and --cluster-key-file (kgate pki --internal-dir writes them), or --insecure-internal")
	}
	if p.role, err = pki.LoadInternalTLS(*f.caFile, *f.certFile, *f.keyFile); err != nil {
		return nil, err
	}
	creds, err := natsauth.ReadFile(*f.natsCredentials)
	if err != nil {
		return nil, err
	}
	p.natsOpts = []nats.Option{nats.UserInfo(creds.User, creds.Password), nats.Secure(p.role.HostClient())}
	if p.gossipKeys, err = cluster.ReadKeyFile(*f.clusterKeyFile); err != nil {
		return nil, err
	}
	log.Info("internal plane secured", "role", role, "gossipKeys", len(p.gossipKeys))
	return p, nil
}

// readServer is a cache node's read API TLS: gateways and cache nodes only.
func (p *internalPlane) readServer() *tls.Config {
	if p.role == nil {
		return nil
	}
	return p.role.Server(pki.RoleGateway, pki.RoleCacheNode)
}

// readClient is a gateway's TLS toward cache nodes.
func (p *internalPlane) readClient() *tls.Config {
	if p.role == nil {
		return nil
	}
	return p.role.Client(pki.RoleCacheNode)
}
