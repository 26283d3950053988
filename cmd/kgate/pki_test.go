package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/deploy/pki"
)

// TestNATSServerConf: the configuration kgate pki writes is one
// nats-server accepts, and it enforces the roles: TLS, credentials, and a
// gateway cannot publish a cache node's status.
func TestNATSServerConf(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server: skipped under -short")
	}
	dir := t.TempDir()
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := natsServerConf(in, bcrypt.MinCost) // the default cost takes seconds under -race
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(file, append([]byte("listen: 127.0.0.1:-1\n"), conf...), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("nats-server refuses the configuration: %v\n%s", err, conf)
	}
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	gw, err := in.LoadRoleTLS(pki.RoleGateway)
	if err != nil {
		t.Fatal(err)
	}
	url := "tls://" + srv.Addr().String()
	if nc, err := nats.Connect(url, nats.Secure(gw.HostClient())); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
	creds, err := natsauth.ReadFile(in.Gateway.NATSCredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 4)
	nc, err := nats.Connect(url, nats.Secure(gw.HostClient()), nats.UserInfo(creds.User, creds.Password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatalf("gateway cannot connect: %v", err)
	}
	defer nc.Close()
	if err := nc.Publish("kgate.status.cn-0", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("gateway publishing a status: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gateway publishing a status was not refused")
	}
}
