// Package aggregatortest issues the certificates of the aggregator's
// tests (serving CAs of extension servers, front-proxy CAs) with
// deploy/testca, failing the test on error.
package aggregatortest

import (
	"testing"

	"github.com/kgate/kgate/deploy/testca"
)

// CA issues certificates for the tests.
type CA struct {
	ca *testca.CA
	// PEM is the CA's certificate.
	PEM []byte
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := testca.New(name)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{ca: ca, PEM: ca.PEM}
}

// Issue returns a certificate and key (PEM) for cn, a server's for the
// DNS names or, with none, a client's.
func (ca *CA) Issue(t testing.TB, cn string, dns ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	var err error
	if len(dns) > 0 {
		certPEM, keyPEM, err = ca.ca.Server(cn, dns...)
	} else {
		certPEM, keyPEM, err = ca.ca.Client(cn)
	}
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}
