package devcluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/directory"
	kevent "github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestInternalPlaneClosed runs two cache nodes and two gateways with the
// internal plane on (the default) and tries it as an intruder on the
// network would: the cache nodes' read API, NATS, gossip and etcd each
// refuse whoever lacks the right certificate, credentials or key, while
// kgate itself works through all of them.
func TestInternalPlaneClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := startDev(ctx, devcluster.Config{
		DataDir: filepath.Join(t.TempDir(), "data"), UnsafeNoFsync: true, Build: "test", Logger: testLogger(),
		CacheNodes: 2, Gateways: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	in := c.Internal
	if in == nil {
		t.Fatal("the internal plane is off by default")
	}
	load := func(in *pki.Internal, role string) *pki.InternalTLS {
		l, err := in.LoadRoleTLS(role)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	gw, cn := load(in, pki.RoleGateway), load(in, pki.RoleCacheNode)
	foreign, err := pki.EnsureInternal(pki.InternalConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	foreignGW := load(foreign, pki.RoleGateway)

	// kgate works end to end: writes go to the mTLS etcd, reads come
	// from the cache nodes over mTLS, watches over NATS with credentials.
	cs := clientset(t, c, true, nil)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "security-test"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through the gateway: %v", err)
	}
	storagetest.Eventually(t, 10*time.Second, "the namespace read back from a cache node", func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "security-test", metav1.GetOptions{ResourceVersion: "0"})
		return err
	})

	t.Run("read API", func(t *testing.T) {
		for _, n := range c.Nodes {
			addr := n.Node.Addr()
			rangeID := n.Node.Status()[0].ID
			ready := func(cfg *tls.Config) error {
				cl, err := client.New(client.Config{Addr: addr, TLS: cfg, Timeout: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				return cl.Ready(ctx, rangeID)
			}
			if err := ready(gw.Client(pki.RoleCacheNode)); err != nil {
				t.Errorf("%s: gateway refused: %v", addr, err)
			}
			if err := ready(cn.Client(pki.RoleCacheNode)); err != nil {
				t.Errorf("%s: cache node refused: %v", addr, err)
			}
			noCert := gw.Client(pki.RoleCacheNode)
			noCert.Certificates = nil
			for name, cfg := range map[string]*tls.Config{
				"no client certificate":     noCert,
				"a gateway of another CA":   foreignGW.Client(pki.RoleCacheNode),
				"the internal CA, no cert":  {RootCAs: gw.Roots(), ServerName: "127.0.0.1"},
				"anything, no verification": {InsecureSkipVerify: true},
			} {
				if err := handshake(addr, cfg); err == nil {
					t.Errorf("%s: %s: TLS handshake accepted", addr, name)
				}
				if err := ready(cfg); err == nil {
					t.Errorf("%s: %s: read accepted", addr, name)
				}
			}
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode < 500 && resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%s: plain HTTP answered %s", addr, resp.Status)
				}
			}
		}
	})

	t.Run("NATS", func(t *testing.T) {
		url := c.NATSURL()
		secure := nats.Secure(&tls.Config{RootCAs: gw.Roots(), MinVersion: tls.VersionTLS12})
		if nc, err := nats.Connect(url, secure); err == nil {
			nc.Close()
			t.Error("connected without credentials")
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("without credentials: %v, want an authorization error", err)
		}
		creds := func(role string) natsauth.Credentials {
			f, err := in.Role(role)
			if err != nil {
				t.Fatal(err)
			}
			cr, err := natsauth.ReadFile(f.NATSCredentialsFile)
			if err != nil {
				t.Fatal(err)
			}
			return cr
		}
		gc := creds(pki.RoleGateway)
		plainURL := "nats://" + url[len("tls://"):]
		if nc, err := nats.Connect(plainURL, nats.UserInfo(gc.User, gc.Password)); err == nil {
			nc.Close()
			t.Error("connected without TLS")
		}
		violations := make(chan error, 16)
		connect := func(cr natsauth.Credentials) *nats.Conn {
			nc, err := nats.Connect(url, secure, nats.UserInfo(cr.User, cr.Password),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			return nc
		}
		gwc, cnc := connect(gc), connect(creds(pki.RoleCacheNode))
		forged := fmt.Appendf(nil, `{"v":1,"n":"evil","a":"127.0.0.1:1","e":%d,"r":[{"i":%q,"y":true,"s":1,"p":true}]}`,
			time.Now().UnixNano(), c.Nodes[0].Node.Status()[0].ID)
		for _, subj := range []string{directory.Subject("evil"), kevent.Subject(c.Nodes[0].Node.Status()[0].ID, "default")} {
			if err := gwc.Publish(subj, forged); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-violations:
				if !errors.Is(err, nats.ErrPermissionViolation) {
					t.Errorf("gateway publishing on %s: %v, want a permission violation", subj, err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("gateway publishing on %s was not refused", subj)
			}
		}
		// A stolen cache-node password still cannot speak for another
		// node: the directories ignore a status on another's subject.
		if err := cnc.Publish(directory.Subject(c.Nodes[0].Name()), forged); err != nil {
			t.Fatal(err)
		}
		storagetest.Eventually(t, 10*time.Second, "every directory ignored the forged status", func() error {
			if got := ignored(t, c.Registry); got < float64(len(c.Nodes)+len(c.Gateways)) {
				return fmt.Errorf("ignored %v status messages, want one per directory (%d)", got, len(c.Nodes)+len(c.Gateways))
			}
			return nil
		})
		for _, g := range c.Gateways {
			for _, n := range g.Directory().Nodes() {
				if n.Node == "evil" {
					t.Errorf("a gateway's directory lists the forged node: %+v", n)
				}
			}
		}
	})

	t.Run("gossip", func(t *testing.T) {
		for name, keys := range map[string][][]byte{"no key": nil, "another key": {make([]byte, 32)}} {
			mc := memberlist.DefaultLANConfig()
			mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = "intruder", "127.0.0.1", 0, 0
			mc.LogOutput = io.Discard
			if keys != nil {
				kr, err := memberlist.NewKeyring(keys, keys[0])
				if err != nil {
					t.Fatal(err)
				}
				mc.Keyring = kr
			}
			ml, err := memberlist.Create(mc)
			if err != nil {
				t.Fatal(err)
			}
			n, err := ml.Join([]string{c.Nodes[0].Members.Addr(), c.Gateways[0].Members.Addr()})
			if err == nil || n != 0 {
				t.Errorf("%s: joined %d members (err %v)", name, n, err)
			}
			if err := ml.Shutdown(); err != nil {
				t.Error(err)
			}
		}
		for _, m := range c.Nodes[0].Members.Members() {
			if m.Name == "intruder" {
				t.Errorf("the intruder is a member: %+v", m)
			}
		}
	})

	t.Run("etcd", func(t *testing.T) {
		for _, ep := range c.EtcdEndpoints() {
			if ep[:len("https://")] != "https://" {
				t.Errorf("etcd endpoint %s is not https", ep)
			}
		}
		get := func(cfg *tls.Config) error {
			ec, err := clientv3.New(clientv3.Config{Endpoints: c.EtcdEndpoints(), TLS: cfg, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return err
			}
			defer ec.Close()
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, err = ec.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err
		}
		if err := get(cn.HostClient()); err != nil {
			t.Errorf("with the cache-node certificate: %v", err)
		}
		if err := get(&tls.Config{RootCAs: cn.Roots(), MinVersion: tls.VersionTLS12}); err == nil {
			t.Error("etcd answered a client without a certificate")
		}
		if err := get(foreignGW.HostClient()); err == nil {
			t.Error("etcd answered a client certificate of another CA")
		}
	})
}

// handshake completes a TLS handshake with addr and reads: a server that
// refuses the client certificate fails the read under TLS 1.3.
func handshake(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

// ignored sums kgate_directory_ignored_messages_total{reason="subject"}.
func ignored(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "kgate_directory_ignored_messages_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "subject" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
