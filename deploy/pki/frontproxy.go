package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The front proxy's files inside the directory given to EnsureFrontProxy.
const (
	FrontProxyCAFileName   = "front-proxy-ca.crt"
	FrontProxyCAKeyName    = "front-proxy-ca.key"
	FrontProxyCertFileName = "front-proxy-client.crt"
	FrontProxyKeyFileName  = "front-proxy-client.key"
	// FrontProxyClientName is the client certificate's common name, the
	// one name the gateways accept identity headers from
	// (--requestheader-allowed-names), as kubeadm names it.
	FrontProxyClientName = "front-proxy-client"
)

// FrontProxy is the front proxy's CA and client certificate: the
// gateways present the certificate to extension API servers
// (--proxy-client-cert-file) and trust identity headers from requests
// bearing it (--requestheader-client-ca-file), as kubeadm sets up
// kube-apiserver.
type FrontProxy struct {
	CAFile, CertFile, KeyFile string
}

// EnsureFrontProxy makes sure dir holds a valid front-proxy CA (a CA of
// its own, apart from the cluster's, as upstream requires) and client
// certificate, as Ensure does for the others: reused when valid,
// regenerated when missing, invalid or about to expire.
func EnsureFrontProxy(dir string, now time.Time) (*FrontProxy, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("cannot create directory: %w", err)
	}
	b := newBundle(dir)
	fp := &FrontProxy{
		CAFile:   filepath.Join(dir, FrontProxyCAFileName),
		CertFile: filepath.Join(dir, FrontProxyCertFileName),
		KeyFile:  filepath.Join(dir, FrontProxyKeyFileName),
	}
	caKeyFile := filepath.Join(dir, FrontProxyCAKeyName)
	ca, err := loadKeyPair(fp.CAFile, caKeyFile)
	if err == nil {
		err = checkCA(ca, now)
	}
	newCA := err != nil
	if newCA {
		tmpl := caTemplate(now)
		tmpl.Subject = pkix.Name{CommonName: "kgate-front-proxy-ca"}
		if ca, err = newKeyPair(tmpl, nil); err != nil {
			return nil, fmt.Errorf("cannot create front-proxy CA: %w", err)
		}
		if err := b.writePair(ca, fp.CAFile, caKeyFile); err != nil {
			return nil, err
		}
	}
	client, err := loadKeyPair(fp.CertFile, fp.KeyFile)
	if err == nil && !newCA {
		err = checkLeaf(client, ca, x509.ExtKeyUsageClientAuth, now)
		if err == nil && client.cert.Subject.CommonName != FrontProxyClientName {
			err = fmt.Errorf("%w: subject %s", errStale, client.cert.Subject)
		}
	}
	if err != nil || newCA {
		tmpl := adminTemplate(now)
		tmpl.Subject = pkix.Name{CommonName: FrontProxyClientName}
		if client, err = newKeyPair(tmpl, ca); err != nil {
			return nil, fmt.Errorf("cannot create front-proxy client certificate: %w", err)
		}
		if err := b.writePair(client, fp.CertFile, fp.KeyFile); err != nil {
			return nil, err
		}
	}
	return fp, nil
}
