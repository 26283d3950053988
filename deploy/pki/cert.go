package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"time"
)

// keyPair is a certificate with its private key, both parsed and as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// newKeyPair makes an ECDSA P-256 key and a certificate from tmpl, signed
// by parent (self-signed when parent is nil).
func newKeyPair(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("cannot generate serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, key
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signerKey)
	if err != nil {
		return nil, fmt.Errorf("cannot create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cannot parse new certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("cannot encode key: %w", err)
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// caTemplate is the self-signed CA valid from now.
func caTemplate(now time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: caCommonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

// servingTemplate is the serving certificate for hosts valid from now.
func servingTemplate(now time.Time, hosts []string) *x509.Certificate {
	t := &x509.Certificate{
		Subject:     pkix.Name{CommonName: servingCommonName},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(leafValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
	return t
}

// adminTemplate is the admin client certificate valid from now.
func adminTemplate(now time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(leafValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// loadKeyPair reads a certificate and its key and checks that they match.
func loadKeyPair(certFile, keyFile string) (*keyPair, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("cannot load key pair %s: %w", certFile, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("cannot use key %s: %T is not an ECDSA key", keyFile, pair.PrivateKey)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("cannot parse certificate %s: %w", certFile, err)
		}
	}
	return &keyPair{cert: leaf, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// errStale: a certificate on disk must be replaced.
var errStale = errors.New("stale certificate")

// checkFresh fails when cert is not yet valid or expires within renewBefore.
func checkFresh(cert *x509.Certificate, now time.Time) error {
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("%w: not valid before %s", errStale, cert.NotBefore)
	}
	if now.Add(renewBefore).After(cert.NotAfter) {
		return fmt.Errorf("%w: expires %s", errStale, cert.NotAfter)
	}
	return nil
}

// checkCA fails unless kp is a fresh self-signed CA.
func checkCA(kp *keyPair, now time.Time) error {
	if !kp.cert.IsCA || kp.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return fmt.Errorf("%w: not a CA", errStale)
	}
	if err := kp.cert.CheckSignatureFrom(kp.cert); err != nil {
		return fmt.Errorf("%w: not self-signed: %w", errStale, err)
	}
	return checkFresh(kp.cert, now)
}

// checkLeaf fails unless kp is fresh and chains to ca for usage.
func checkLeaf(kp *keyPair, ca *keyPair, usage x509.ExtKeyUsage, now time.Time) error {
	if err := checkFresh(kp.cert, now); err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	_, err := kp.cert.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return nil
}

// checkServing fails unless kp is a fresh serving certificate from ca for
// exactly hosts.
func checkServing(kp *keyPair, ca *keyPair, hosts []string, now time.Time) error {
	if err := checkLeaf(kp, ca, x509.ExtKeyUsageServerAuth, now); err != nil {
		return err
	}
	want := servingTemplate(now, hosts)
	if !slices.Equal(kp.cert.DNSNames, want.DNSNames) ||
		!slices.EqualFunc(kp.cert.IPAddresses, want.IPAddresses, net.IP.Equal) {
		return fmt.Errorf("%w: names %v %v, want %v", errStale, kp.cert.DNSNames, kp.cert.IPAddresses, hosts)
	}
	return nil
}

// checkAdmin fails unless kp is a fresh admin client certificate from ca.
func checkAdmin(kp *keyPair, ca *keyPair, now time.Time) error {
	if err := checkLeaf(kp, ca, x509.ExtKeyUsageClientAuth, now); err != nil {
		return err
	}
	s := kp.cert.Subject
	if s.CommonName != AdminUser || !slices.Equal(s.Organization, []string{AdminGroup}) {
		return fmt.Errorf("%w: subject %s", errStale, s)
	}
	return nil
}
