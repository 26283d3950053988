package natsauth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/cachenode/natsembed"
)

// TestPermissions: on a server with the roles' users, a client without credentials (or with a wrong
// password) cannot connect; a gateway cannot publish what cache nodes
// publish, and what it tried never reaches a subscriber; a cache node can.
func TestPermissions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server: skipped under -short")
	}
	gw := natsauth.Credentials{User: "gateway", Password: "gw-secret"}
	cn := natsauth.Credentials{User: "cachenode", Password: "cn-secret"}
	user := func(c natsauth.Credentials, role string) natsembed.User {
		p, ok := natsauth.For(role)
		if !ok {
			t.Fatalf("no permissions for %s", role)
		}
		return natsembed.User{Name: c.User, Password: c.Password, Publish: p.Publish, Subscribe: p.Subscribe}
	}
	s, err := natsembed.Start(natsembed.Config{Users: []natsembed.User{user(gw, natsauth.RoleGateway), user(cn, natsauth.RoleCacheNode)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	for name, opts := range map[string][]nats.Option{
		"no credentials": nil,
		"wrong password": {nats.UserInfo("gateway", "guess")},
	} {
		if nc, err := nats.Connect(s.ClientURL(), opts...); !errors.Is(err, nats.ErrAuthorization) {
			if nc != nil {
				nc.Close()
			}
			t.Errorf("%s: Connect = %v, want an authorization error", name, err)
		}
	}

	violations := make(chan error, 16)
	connect := func(c natsauth.Credentials) *nats.Conn {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(c.User, c.Password),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	gwc, cnc := connect(gw), connect(cn)
	evSubject, statusSubject := event.Subject("pods-0", "default"), directory.Subject("cachenode-0")
	for _, subj := range []string{evSubject, statusSubject} {
		sub, err := gwc.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		if err := gwc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := gwc.Publish(subj, []byte("forged")); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-violations:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("%s: gateway publish error %v, want a permission violation", subj, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: gateway publish was not refused", subj)
		}
		if err := cnc.Publish(subj, []byte("real")); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil || string(m.Data) != "real" {
			t.Fatalf("%s: first message = %v, %v; want the cache node's", subj, m, err)
		}
	}
	// A cache node may not subscribe to events (it has no use for them);
	// a gateway may still probe the publishers.
	if _, err := cnc.SubscribeSync(evSubject); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("cache node subscribe error %v, want a permission violation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cache node subscription to events was not refused")
	}
	sub, err := cnc.SubscribeSync(directory.ProbeSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := cnc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := gwc.Publish(directory.ProbeSubject, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("gateway probe not delivered: %v", err)
	}
	// A gateway asks a range's primary for its progress (merged watches).
	req, err := cnc.SubscribeSync(event.ProgressRequestSubject("pods-0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cnc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := gwc.Publish(event.ProgressRequestSubject("pods-0"), []byte("42")); err != nil {
		t.Fatal(err)
	}
	if m, err := req.NextMsg(10 * time.Second); err != nil || string(m.Data) != "42" {
		t.Fatalf("gateway progress request not delivered: %v, %v", m, err)
	}
}

func TestParse(t *testing.T) {
	f := func(in string, want natsauth.Credentials, ok bool) {
		t.Helper()
		got, err := natsauth.Parse([]byte(in))
		if ok != (err == nil) || got != want {
			t.Errorf("Parse(%q) = %+v, %v", in, got, err)
		}
		if ok {
			if back, err := natsauth.Parse(got.Format()); err != nil || back != got {
				t.Errorf("Parse(Format(%+v)) = %+v, %v", got, back, err)
			}
		}
	}
	f("gateway:s3cret\n", natsauth.Credentials{User: "gateway", Password: "s3cret"}, true)
	f("  cachenode:a:b  ", natsauth.Credentials{User: "cachenode", Password: "a:b"}, true)
	f("gateway", natsauth.Credentials{}, false)
	f("gateway:", natsauth.Credentials{}, false)
	f(":pw", natsauth.Credentials{}, false)
	f("a b:pw", natsauth.Credentials{}, false)
	f("a:pw\nb:pw", natsauth.Credentials{}, false)
	if _, ok := natsauth.For("admin"); ok {
		t.Error("For(admin) has permissions")
	}
}

func TestAuditAllowed(t *testing.T) {
	for subject, want := range map[string]bool{
		"kgate.audit": true, "kgate.audit.gw-0": true, "kgate.audit.": false,
		"kgate.auditx": false, "audit": false, "kgate.ev.pods.default": false,
	} {
		if got := natsauth.AuditAllowed(subject); got != want {
			t.Errorf("AuditAllowed(%q) = %v, want %v", subject, got, want)
		}
	}
}
