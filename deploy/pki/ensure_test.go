package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const testURL = "https://127.0.0.1:6443"

// files maps each file of b to its content.
func files(t *testing.T, b *Bundle) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range []string{b.CAFile, filepath.Join(filepath.Dir(b.CAFile), CAKeyFileName),
		b.ServingCertFile, b.ServingKeyFile, b.AdminCertFile, b.AdminKeyFile, b.KubeconfigFile} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(name)] = data
	}
	return m
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnsureFresh(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	b, err := Ensure(Config{Dir: dir, ServerURL: testURL})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Written) != 7 {
		t.Errorf("Written = %v, want 7 files", b.Written)
	}
	modes := map[string]os.FileMode{
		CAFileName: 0o644, CAKeyFileName: 0o600, ServingCertFileName: 0o644, ServingKeyFileName: 0o600,
		AdminCertFileName: 0o644, AdminKeyFileName: 0o600, KubeconfigFileName: 0o600,
	}
	for name, want := range modes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %v, want %v", name, got, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(modes) {
		t.Errorf("dir has %d entries, want %d (no temporary files left)", len(entries), len(modes))
	}

	fs := files(t, b)
	ca := parseCert(t, fs[CAFileName])
	if !ca.IsCA || ca.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA: IsCA=%v alg=%v", ca.IsCA, ca.PublicKeyAlgorithm)
	}
	serving := parseCert(t, fs[ServingCertFileName])
	for _, h := range []string{"127.0.0.1", "::1", "localhost"} {
		if err := serving.VerifyHostname(h); err != nil {
			t.Errorf("serving cert: %v", err)
		}
	}
	admin := parseCert(t, fs[AdminCertFileName])
	if admin.Subject.CommonName != "kgate-admin" || !slices.Equal(admin.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject = %v", admin.Subject)
	}

	raw, err := clientcmd.LoadFromFile(b.KubeconfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if raw.CurrentContext != "kgate" {
		t.Errorf("current context = %q", raw.CurrentContext)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", b.KubeconfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != testURL || !bytes.Equal(rc.CAData, fs[CAFileName]) ||
		!bytes.Equal(rc.CertData, fs[AdminCertFileName]) || !bytes.Equal(rc.KeyData, fs[AdminKeyFileName]) {
		t.Errorf("rest.Config = host %q, CA/cert/key from files: %v %v %v", rc.Host,
			bytes.Equal(rc.CAData, fs[CAFileName]), bytes.Equal(rc.CertData, fs[AdminCertFileName]),
			bytes.Equal(rc.KeyData, fs[AdminKeyFileName]))
	}
	if _, err := rest.TransportFor(rc); err != nil {
		t.Errorf("cannot build transport: %v", err)
	}
}

func TestEnsureReuse(t *testing.T) {
	dir := t.TempDir()
	b1, err := Ensure(Config{Dir: dir, ServerURL: testURL})
	if err != nil {
		t.Fatal(err)
	}
	before := files(t, b1)
	b2, err := Ensure(Config{Dir: dir, ServerURL: testURL})
	if err != nil {
		t.Fatal(err)
	}
	if len(b2.Written) != 0 {
		t.Errorf("second Ensure wrote %v", b2.Written)
	}
	after := files(t, b2)
	for name := range before {
		if !bytes.Equal(before[name], after[name]) {
			t.Errorf("%s changed", name)
		}
	}
}

func TestEnsureRegenerates(t *testing.T) {
	base := Config{ServerURL: testURL}
	f := func(name string, change func(dir string, cfg *Config), want ...string) {
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.Dir = t.TempDir()
			b, err := Ensure(cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := files(t, b)
			change(cfg.Dir, &cfg)
			b, err = Ensure(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range b.Written {
				got = append(got, filepath.Base(w))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("Written = %v, want %v", got, want)
			}
			after := files(t, b)
			for name := range before {
				// A rewritten kubeconfig may have its old content again.
				changed := !bytes.Equal(before[name], after[name])
				if rewritten := slices.Contains(want, name); changed != rewritten &&
					(changed || name != KubeconfigFileName) {
					t.Errorf("%s changed = %v", name, changed)
				}
			}
		})
	}
	remove := func(names ...string) func(string, *Config) {
		return func(dir string, _ *Config) {
			for _, n := range names {
				if err := os.Remove(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	corrupt := func(name string) func(string, *Config) {
		return func(dir string, _ *Config) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	later := func(d time.Duration) func(string, *Config) {
		return func(_ string, cfg *Config) { cfg.Now = func() time.Time { return time.Now().Add(d) } }
	}

	f("nothing", func(string, *Config) {})
	f("serving key missing", remove(ServingKeyFileName), ServingCertFileName, ServingKeyFileName)
	f("admin cert corrupt", corrupt(AdminCertFileName), AdminCertFileName, AdminKeyFileName, KubeconfigFileName)
	f("kubeconfig missing", remove(KubeconfigFileName), KubeconfigFileName)
	f("kubeconfig edited", corrupt(KubeconfigFileName), KubeconfigFileName)
	f("CA key missing", remove(CAKeyFileName), CAFileName, CAKeyFileName, ServingCertFileName,
		ServingKeyFileName, AdminCertFileName, AdminKeyFileName, KubeconfigFileName)
	f("leaves expiring", later(leafValidity-renewBefore+time.Hour), ServingCertFileName,
		ServingKeyFileName, AdminCertFileName, AdminKeyFileName, KubeconfigFileName)
	f("still fresh", later(leafValidity-renewBefore-2*time.Hour))
	f("CA expired", later(caValidity+time.Hour), CAFileName, CAKeyFileName, ServingCertFileName,
		ServingKeyFileName, AdminCertFileName, AdminKeyFileName, KubeconfigFileName)
	f("hosts changed", func(_ string, cfg *Config) {
		cfg.Hosts = []string{"127.0.0.1", "kgate.example.com"}
	}, ServingCertFileName, ServingKeyFileName)
	f("server URL changed", func(_ string, cfg *Config) {
		cfg.ServerURL = "https://localhost:7443"
	}, KubeconfigFileName)
	f("key of another pair", func(dir string, _ *Config) {
		data, err := os.ReadFile(filepath.Join(dir, AdminKeyFileName))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ServingKeyFileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}, ServingCertFileName, ServingKeyFileName)
}

func TestConfigInvalid(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]Config{
		"no dir":           {ServerURL: testURL},
		"no server":        {Dir: dir},
		"http server":      {Dir: dir, ServerURL: "http://127.0.0.1:6443"},
		"server not host":  {Dir: dir, ServerURL: "https://10.0.0.1:6443"},
		"bad host":         {Dir: dir, ServerURL: testURL, Hosts: []string{"127.0.0.1", "not a host"}},
		"unparsable":       {Dir: dir, ServerURL: "https://[::1"},
		"host not in list": {Dir: dir, ServerURL: "https://kgate.local", Hosts: []string{"localhost"}},
	} {
		if _, err := Ensure(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := Ensure(Config{Dir: dir, ServerURL: "https://[::1]:6443"}); err != nil {
		t.Errorf("IPv6 server URL: %v", err)
	}
}

// TestServingTLSHandshake runs a fasthttp server with ServingTLS and calls it
// with a client built from the kubeconfig: the server must see the admin
// certificate verified against the CA, over HTTP/1.1.
func TestServingTLSHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Ensure(Config{Dir: t.TempDir(), ServerURL: "https://" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := b.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(b.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ca := parseCert(t, caPEM)

	type seen struct {
		user, group, root, proto string
	}
	got := make(chan seen, 1)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		var s seen
		if cs := ctx.TLSConnectionState(); cs != nil {
			s.proto = cs.NegotiatedProtocol
			if len(cs.PeerCertificates) > 0 {
				s.user = cs.PeerCertificates[0].Subject.CommonName
				s.group = cs.PeerCertificates[0].Subject.Organization[0]
			}
			// The gateway requests but does not verify client certificates
			// (its authenticator does, answering 401): verify here.
			var chains [][]*x509.Certificate
			if len(cs.PeerCertificates) > 0 {
				chains, _ = cs.PeerCertificates[0].Verify(x509.VerifyOptions{
					Roots: tlsCfg.ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
				})
			}
			if len(chains) > 0 {
				chain := chains[0]
				s.root = chain[len(chain)-1].Subject.CommonName
				if !chain[len(chain)-1].Equal(ca) {
					s.root = "not the CA"
				}
			}
		}
		got <- s
		ctx.SetBodyString("ok")
	}}
	go func() { _ = srv.Serve(tls.NewListener(ln, tlsCfg)) }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	rc, err := clientcmd.BuildConfigFromFlags("", b.KubeconfigFile)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 10 * time.Second
	resp, err := hc.Get(rc.Host + "/version")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" || resp.ProtoMajor != 1 {
		t.Errorf("response %s %d %q", resp.Proto, resp.StatusCode, body)
	}
	want := seen{user: "kgate-admin", group: "system:masters", root: "kgate-ca", proto: "http/1.1"}
	if s := <-got; s != want {
		t.Errorf("server saw %+v, want %+v", s, want)
	}
}
