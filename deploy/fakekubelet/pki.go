package fakekubelet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the fake kubelet's certificates: one CA that signs the
// kubelet's serving certificate (127.0.0.1) and the client certificate
// the API server presents (CN kube-apiserver-kubelet-client), written as
// files as kube-apiserver's --kubelet-* flags take them.
type PKI struct {
	// CAFile verifies the kubelet (--kubelet-certificate-authority).
	CAFile string
	// ClientCertFile, ClientKeyFile: --kubelet-client-certificate/-key.
	ClientCertFile, ClientKeyFile string

	serving tls.Certificate
	pool    *x509.CertPool
}

// NewPKI makes the certificates and writes the files into dir.
func NewPKI(dir string) (*PKI, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot make CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake-kubelet-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("cannot make CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("cannot parse CA: %w", err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		return der, key, err
	}
	servDER, servKey, err := leaf(2, "fake-kubelet", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")})
	if err != nil {
		return nil, fmt.Errorf("cannot make serving certificate: %w", err)
	}
	cliDER, cliKey, err := leaf(3, "kube-apiserver-kubelet-client", x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot make client certificate: %w", err)
	}
	p := &PKI{
		CAFile: filepath.Join(dir, "kubelet-ca.crt"), ClientCertFile: filepath.Join(dir, "kubelet-client.crt"),
		ClientKeyFile: filepath.Join(dir, "kubelet-client.key"), pool: x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	p.serving = tls.Certificate{Certificate: [][]byte{servDER}, PrivateKey: servKey}
	cliKeyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		return nil, fmt.Errorf("cannot encode client key: %w", err)
	}
	for _, f := range []struct {
		name, typ string
		der       []byte
	}{{p.CAFile, "CERTIFICATE", caDER}, {p.ClientCertFile, "CERTIFICATE", cliDER}, {p.ClientKeyFile, "EC PRIVATE KEY", cliKeyDER}} {
		if err := os.WriteFile(f.name, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return nil, fmt.Errorf("cannot write %s: %w", f.name, err)
		}
	}
	return p, nil
}
