package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"
)

// TestEnsureFrontProxy: a CA of its own and a client certificate
// front-proxy-client chaining to it; reused byte for byte while valid;
// a new CA means a new client certificate.
func TestEnsureFrontProxy(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	fp, err := EnsureFrontProxy(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	parse := func(name string) *x509.Certificate {
		t.Helper()
		block, _ := pem.Decode(read(name))
		if block == nil {
			t.Fatalf("%s: no PEM", name)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, client := parse(fp.CAFile), parse(fp.CertFile)
	if client.Subject.CommonName != FrontProxyClientName || ca.Subject.CommonName == caCommonName {
		t.Errorf("client %q, CA %q", client.Subject.CommonName, ca.Subject.CommonName)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate does not chain to the front-proxy CA for client auth: %v", err)
	}
	if info, err := os.Stat(fp.KeyFile); err != nil || info.Mode().Perm() != keyFileMode {
		t.Errorf("key file mode: %v %v", info.Mode(), err)
	}

	before := read(fp.CertFile)
	if _, err := EnsureFrontProxy(dir, now); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(fp.CertFile), before) {
		t.Error("a valid client certificate was rewritten")
	}

	if err := os.Remove(fp.CAFile); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureFrontProxy(dir, now); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(read(fp.CertFile), before) {
		t.Error("a new CA kept the old client certificate")
	}
	// Close to expiry: renewed.
	if _, err := EnsureFrontProxy(dir, now.Add(leafValidity-renewBefore/2)); err != nil {
		t.Fatal(err)
	}
	if got := parse(fp.CertFile); !got.NotAfter.After(now.Add(leafValidity)) {
		t.Errorf("a client certificate expiring within %v was not renewed (NotAfter %v)", renewBefore, got.NotAfter)
	}
}
