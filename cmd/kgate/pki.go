package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/deploy/pki"
)

// runPKI writes (or refreshes) a CA, a serving certificate, an admin
// client certificate and a kubeconfig, as kgate dev does, for clusters run
// as separate processes; with --internal-dir also the internal plane's
// certificates, NATS credentials, gossip keyring and a nats-server
// configuration enforcing the roles' permissions.
func runPKI(args []string) error {
	fs := flag.NewFlagSet("kgate pki", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for the certificates and the kubeconfig; required")
	server := fs.String("server", "https://127.0.0.1:6443", "the URL the kubeconfig names")
	hosts := fs.String("hosts", "127.0.0.1,::1,localhost", "IP addresses and DNS names of the serving certificate, comma-separated")
	internalDir := fs.String("internal-dir", "", "also write the internal plane here: CA, gateway and cache-node certificates, NATS and etcd server certificates, NATS credentials, gossip keyring, nats-server.conf")
	internalHosts := fs.String("internal-hosts", "127.0.0.1,::1,localhost", "IP addresses and DNS names of the internal NATS and etcd server certificates, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	b, err := pki.Ensure(pki.Config{Dir: *dir, Hosts: strings.Split(*hosts, ","), ServerURL: *server})
	if err != nil {
		return err
	}
	fmt.Printf("ca:          %s\nserving:     %s %s\nkubeconfig:  %s\n", b.CAFile, b.ServingCertFile, b.ServingKeyFile, b.KubeconfigFile)
	if *internalDir == "" {
		return nil
	}
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: *internalDir, Hosts: strings.Split(*internalHosts, ",")})
	if err != nil {
		return err
	}
	conf, err := natsServerConf(in, bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	confFile := filepath.Join(*internalDir, "nats-server.conf")
	if err := os.WriteFile(confFile, conf, 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", confFile, err)
	}
	fmt.Printf("internal ca: %s\ngateway:     %s %s %s\ncachenode:   %s %s %s\nnats server: %s %s (%s)\netcd server: %s %s\ngossip keys: %s\n",
		in.CAFile, in.Gateway.CertFile, in.Gateway.KeyFile, in.Gateway.NATSCredentialsFile,
		in.CacheNode.CertFile, in.CacheNode.KeyFile, in.CacheNode.NATSCredentialsFile,
		in.NATSServerCertFile, in.NATSServerKeyFile, confFile, in.EtcdServerCertFile, in.EtcdServerKeyFile, in.ClusterKeyFile)
	return nil
}

// natsServerConf is a nats-server configuration fragment (include it, or
// use it as is with a listen line): TLS with the NATS server certificate
// and the roles' users (bcrypt hashes of their passwords), each allowed
// only its subjects (natsauth.For). cost is bcrypt's.
func natsServerConf(in *pki.Internal, cost int) ([]byte, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Written by kgate pki: the roles of kgate and their subjects.\ntls {\n  cert_file: %s\n  key_file: %s\n}\nauthorization {\n  users: [\n",
		strconv.Quote(in.NATSServerCertFile), strconv.Quote(in.NATSServerKeyFile))
	for _, role := range []string{pki.RoleGateway, pki.RoleCacheNode} {
		f, err := in.Role(role)
		if err != nil {
			return nil, err
		}
		c, err := natsauth.ReadFile(f.NATSCredentialsFile)
		if err != nil {
			return nil, err
		}
		p, _ := natsauth.For(role) // a known role
		hash, err := bcrypt.GenerateFromPassword([]byte(c.Password), cost)
		if err != nil {
			return nil, fmt.Errorf("cannot hash the NATS password of %s: %w", role, err)
		}
		fmt.Fprintf(&sb, "    {user: %s, password: %s, permissions: {publish: {allow: %s}, subscribe: {allow: %s}}}\n",
			strconv.Quote(c.User), strconv.Quote(string(hash)), quoteList(p.Publish), quoteList(p.Subscribe))
	}
	sb.WriteString("  ]\n}\n")
	return []byte(sb.String()), nil
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
