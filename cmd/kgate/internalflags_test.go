package main

import (
	"flag"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/kgate/kgate/deploy/pki"
)

func TestInternalFlags(t *testing.T) {
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	full := []string{"--internal-ca-file", in.CAFile, "--internal-cert-file", in.Gateway.CertFile, "--internal-key-file", in.Gateway.KeyFile,
		"--nats-credentials-file", in.Gateway.NATSCredentialsFile, "--cluster-key-file", in.ClusterKeyFile}
	f := func(name string, args []string, wantErr string, secure bool) {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			flags := addInternalFlags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			p, err := flags.resolve(pki.RoleGateway, slog.New(slog.DiscardHandler))
			if wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("resolve = %v, want an error with %q", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if wantEtcd := slices.Contains(args, "--etcd-certfile"); wantEtcd != (p.etcdTLS != nil) {
				t.Fatalf("etcd TLS = %v, want it %v", p.etcdTLS, wantEtcd)
			}
			if got := p.role != nil && len(p.natsOpts) == 2 && len(p.gossipKeys) == 1; got != secure {
				t.Fatalf("secured = %v, want %v", got, secure)
			}
			if secure != (p.readServer() != nil && p.readClient() != nil) {
				t.Fatalf("read TLS configs present = %v, want %v", !secure, secure)
			}
		})
	}
	f("nothing: refused", nil, "--insecure-internal", false)
	f("insecure", []string{"--insecure-internal"}, "", false)
	f("all files", full, "", true)
	f("a file missing", full[:len(full)-2], "--cluster-key-file", false)
	f("insecure and files", append([]string{"--insecure-internal"}, full...), "contradicts", false)
	f("unreadable key", append(full[:len(full)-1], in.CAFile), "gossip keyring", false)
	f("etcd cert without key", []string{"--insecure-internal", "--etcd-certfile", in.Gateway.CertFile}, "go together", false)
	f("etcd TLS", []string{"--insecure-internal", "--etcd-cafile", in.CAFile, "--etcd-certfile", in.Gateway.CertFile, "--etcd-keyfile", in.Gateway.KeyFile}, "", false)
}
