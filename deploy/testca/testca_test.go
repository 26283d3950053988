package testca

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// TestIssue: a server certificate verifies for each of its hosts and no
// other, as a server's; a client certificate as a client's, with its
// groups.
func TestIssue(t *testing.T) {
	ca, err := New("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM) {
		t.Fatal("the CA's PEM does not parse")
	}
	parse := func(certPEM, keyPEM []byte) *x509.Certificate {
		t.Helper()
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srvCert, srvKey, err := ca.Server("api", "api.ext.svc", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv := parse(srvCert, srvKey)
	for _, tc := range []struct {
		host string
		ok   bool
	}{{"api.ext.svc", true}, {"127.0.0.1", true}, {"other.ext.svc", false}, {"127.0.0.2", false}} {
		_, err := srv.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if (err == nil) != tc.ok {
			t.Errorf("server certificate for %s: %v, want ok=%v", tc.host, err, tc.ok)
		}
	}
	cliCert, cliKey, err := ca.Client("alice", "dev")
	if err != nil {
		t.Fatal(err)
	}
	cli := parse(cliCert, cliKey)
	if _, err := cli.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := cli.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies as a server's")
	}
	if cli.Subject.CommonName != "alice" || len(cli.Subject.Organization) != 1 || cli.Subject.Organization[0] != "dev" {
		t.Errorf("client subject %v, want alice in dev", cli.Subject)
	}
	if srv.SerialNumber.Cmp(cli.SerialNumber) == 0 {
		t.Error("two certificates with one serial number")
	}
}
