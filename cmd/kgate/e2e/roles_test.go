package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/cachenode/natsembed"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/storage/embedded"
)

// role is one process of a test: a `kgate gateway` or `kgate cachenode`,
// or an upstream component (TestControlPlane). name is what messages
// call it.
type role struct {
	name   string
	cmd    *exec.Cmd
	log    syncBuffer
	exited chan struct{}
	err    error
}

func startRole(t *testing.T, name string, args ...string) *role {
	t.Helper()
	return startProcess(t, "kgate "+name, exec.Command(kgateBin, args...))
}

// startProcess starts cmd, with its output kept in the log and printed
// when the test fails; the test's cleanup kills it if it still runs.
func startProcess(t *testing.T, name string, cmd *exec.Cmd) *role {
	t.Helper()
	r := &role{name: name, cmd: cmd, exited: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", name, err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			r.cmd.Process.Kill()
			<-r.exited
		}
		if t.Failed() {
			keepLog(t, name, &r.log)
		}
	})
	return r
}

// stop sends SIGTERM and requires a clean exit.
func (r *role) stop(t *testing.T) {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
		if r.err != nil {
			t.Errorf("%s exited with %v", r.name, r.err)
		}
	case <-time.After(stopTimeout):
		t.Errorf("%s did not stop within %s of SIGTERM", r.name, stopTimeout)
	}
}

// waitHTTP polls url until it answers 200 "ok".
func waitHTTP(t *testing.T, client *http.Client, url string, r *role) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-r.exited:
			t.Fatalf("%s exited before ready: %v", r.name, r.err)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(string(body)) == "ok" {
				return
			}
		}
		select { // an exit is seen at once, on the next round
		case <-r.exited:
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not become ready within %s", url, startTimeout)
}

// TestSeparateRoles runs the production roles as separate processes, as a
// Deployment and a StatefulSet would, against an etcd and a NATS server
// of their own (run here in the test process), and drives them with
// kubectl.
func TestSeparateRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts kgate gateway and kgate cachenode; skipped under -short")
	}
	dir := t.TempDir()
	ctx := context.Background()
	// The internal plane closed as in production: etcd requires client
	// certificates, NATS TLS and the roles' credentials and subjects, the
	// read API mutual TLS, gossip a key.
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: filepath.Join(dir, "internal")})
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := embedded.Start(ctx, embedded.Config{Dir: filepath.Join(dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		UnsafeNoFsync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientTLS: &embedded.ClientTLS{CertFile: in.EtcdServerCertFile, KeyFile: in.EtcdServerKeyFile, TrustedCAFile: in.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	natsCert, err := tls.LoadX509KeyPair(in.NATSServerCertFile, in.NATSServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var users []natsembed.User
	for _, f := range []pki.RoleFiles{in.Gateway, in.CacheNode} {
		c, err := natsauth.ReadFile(f.NATSCredentialsFile)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := natsauth.For(c.User) // users are named after their roles
		users = append(users, natsembed.User{Name: c.User, Password: c.Password, Publish: p.Publish, Subscribe: p.Subscribe})
	}
	nats, err := natsembed.Start(natsembed.Config{TLS: &tls.Config{Certificates: []tls.Certificate{natsCert}}, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nats.Close() })

	gwAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.Ensure(pki.Config{Dir: filepath.Join(dir, "pki"), ServerURL: "https://" + gwAddr})
	if err != nil {
		t.Fatal(err)
	}
	backend := func(f pki.RoleFiles) []string {
		return []string{"--etcd-servers", strings.Join(etcd.Endpoints(), ","), "--nats-url", nats.ClientURL(),
			"--etcd-cafile", in.CAFile, "--etcd-certfile", f.CertFile, "--etcd-keyfile", f.KeyFile,
			"--internal-ca-file", in.CAFile, "--internal-cert-file", f.CertFile, "--internal-key-file", f.KeyFile,
			"--nats-credentials-file", f.NATSCredentialsFile, "--cluster-key-file", in.ClusterKeyFile}
	}
	// Two cache nodes own every range (R=2); the gateway learns who serves
	// what from the cluster.
	var nodes []*role
	var gossip []string
	var metricsAddrs []string
	for i := range 2 {
		readAddr, _ := freeAddr()
		metricsAddr, _ := freeAddr()
		gossipAddr, _ := freeAddr()
		args := append([]string{"cachenode", "--node-name", fmt.Sprintf("cn-%d", i), "--listen", readAddr,
			"--metrics-address", metricsAddr, "--cluster-bind-address", gossipAddr}, backend(in.CacheNode)...)
		if len(gossip) > 0 {
			args = append(args, "--join", strings.Join(gossip, ","))
		}
		n := startRole(t, fmt.Sprintf("cachenode-%d", i), args...)
		waitHTTP(t, http.DefaultClient, "http://"+metricsAddr+"/readyz", n)
		nodes = append(nodes, n)
		gossip = append(gossip, gossipAddr)
		metricsAddrs = append(metricsAddrs, metricsAddr)
	}
	gwGossip, _ := freeAddr()
	host, port, _ := strings.Cut(gwAddr, ":")
	gw := startRole(t, "gateway", append([]string{"gateway", "--cluster-bind-address", gwGossip, "--join", strings.Join(gossip, ","),
		"--bind-address", host, "--secure-port", port,
		"--tls-cert-file", certs.ServingCertFile, "--tls-private-key-file", certs.ServingKeyFile,
		"--client-ca-file", certs.CAFile, "--log-level", "debug"}, backend(in.Gateway)...)...)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	waitHTTP(t, insecure, "https://"+gwAddr+"/readyz", gw)

	k := &kubectl{kubeconfig: certs.KubeconfigFile, cacheDir: filepath.Join(dir, "kubectl-cache")}
	k.ok(t, "create", "namespace", "roles")
	w := k.start(t, true, "get", "configmaps", "-n", "roles", "-w", "--output-watch-events", "-o", "json")
	k.ok(t, "create", "configmap", "one", "-n", "roles", "--from-literal=k=v0")
	want := []string{`"type":"ADDED"`}
	// Kill one cache node outright mid-stream: the other serves the range,
	// takes over publishing, and the watch must see every change in order.
	for i := 1; i <= 6; i++ {
		if i == 3 {
			nodes[0].cmd.Process.Kill()
			<-nodes[0].exited
		}
		k.ok(t, "patch", "configmap", "one", "-n", "roles", "--type=merge", "-p", fmt.Sprintf(`{"data":{"k":"v%d"}}`, i))
		want = append(want, fmt.Sprintf(`"k":"v%d"`, i))
	}
	for i, frag := range want {
		ev := w.next(t, 30*time.Second, frag)
		if !strings.Contains(ev, frag) {
			t.Fatalf("watch event %d is %s, want one with %s", i, ev, frag)
		}
	}
	var cm corev1.ConfigMap
	k.json(t, &cm, "get", "configmap", "one", "-n", "roles", "-o", "json")
	if cm.Data["k"] != "v6" {
		t.Fatalf("configmap data %v", cm.Data)
	}
	metricsAddr := metricsAddrs[1]
	node := nodes[1]
	metrics, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if !strings.Contains(string(body), "kgate_cachenode_") {
		t.Errorf("cache node /metrics has no kgate_cachenode_ series:\n%.500s", body)
	}
	w.stop()
	gw.stop(t)
	node.stop(t)
}
