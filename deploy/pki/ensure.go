package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Ensure makes sure cfg.Dir holds a valid CA, serving certificate, admin
// certificate and kubeconfig, and returns their paths. What is on disk and
// still valid is reused byte for byte; what is missing, unreadable, expiring
// within 30 days, not signed by the CA, or (for the serving certificate) not
// issued for exactly cfg.Hosts is regenerated. A new CA means new serving
// and admin certificates. The kubeconfig is rewritten when its content would
// change. Files are replaced atomically; keys and the kubeconfig are 0600.
func Ensure(cfg Config) (*Bundle, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, dirMode); err != nil {
		return nil, fmt.Errorf("cannot create directory: %w", err)
	}
	b := newBundle(cfg.Dir)
	now := cfg.Now()
	caKeyFile := filepath.Join(cfg.Dir, CAKeyFileName)

	ca, err := loadKeyPair(b.CAFile, caKeyFile)
	if err == nil {
		err = checkCA(ca, now)
	}
	if err != nil {
		if ca, err = newKeyPair(caTemplate(now), nil); err != nil {
			return nil, fmt.Errorf("cannot create CA: %w", err)
		}
		if err := b.writePair(ca, b.CAFile, caKeyFile); err != nil {
			return nil, err
		}
	}

	serving, err := loadKeyPair(b.ServingCertFile, b.ServingKeyFile)
	if err == nil {
		err = checkServing(serving, ca, cfg.Hosts, now)
	}
	if err != nil {
		if serving, err = newKeyPair(servingTemplate(now, cfg.Hosts), ca); err != nil {
			return nil, fmt.Errorf("cannot create serving certificate: %w", err)
		}
		if err := b.writePair(serving, b.ServingCertFile, b.ServingKeyFile); err != nil {
			return nil, err
		}
	}

	admin, err := loadKeyPair(b.AdminCertFile, b.AdminKeyFile)
	if err == nil {
		err = checkAdmin(admin, ca, now)
	}
	if err != nil {
		if admin, err = newKeyPair(adminTemplate(now), ca); err != nil {
			return nil, fmt.Errorf("cannot create admin certificate: %w", err)
		}
		if err := b.writePair(admin, b.AdminCertFile, b.AdminKeyFile); err != nil {
			return nil, err
		}
	}

	kubeconfig, err := clientcmd.Write(kubeconfigFor(cfg.ServerURL, ca, admin))
	if err != nil {
		return nil, fmt.Errorf("cannot encode kubeconfig: %w", err)
	}
	if old, err := os.ReadFile(b.KubeconfigFile); err != nil || !bytes.Equal(old, kubeconfig) {
		if err := b.write(b.KubeconfigFile, kubeconfig, keyFileMode); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// kubeconfigFor is a kubeconfig whose current context "kgate" reaches
// serverURL with the CA and authenticates with the admin certificate; all
// data is embedded so the file can be copied elsewhere.
func kubeconfigFor(serverURL string, ca, admin *keyPair) clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	c.Clusters[KubeconfigContext] = &clientcmdapi.Cluster{
		Server:                   serverURL,
		CertificateAuthorityData: ca.certPEM,
	}
	c.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{
		ClientCertificateData: admin.certPEM,
		ClientKeyData:         admin.keyPEM,
	}
	c.Contexts[KubeconfigContext] = &clientcmdapi.Context{
		Cluster:  KubeconfigContext,
		AuthInfo: AdminUser,
	}
	c.CurrentContext = KubeconfigContext
	return *c
}

// writePair writes a certificate (0644) and its key (0600); the key goes
// first so a certificate on disk never lacks its key.
func (b *Bundle) writePair(kp *keyPair, certFile, keyFile string) error {
	if err := b.write(keyFile, kp.keyPEM, keyFileMode); err != nil {
		return err
	}
	return b.write(certFile, kp.certPEM, certFileMode)
}

// write replaces name atomically and records it in b.Written.
func (b *Bundle) write(name string, data []byte, mode fs.FileMode) error {
	if err := writeAtomic(name, data, mode); err != nil {
		return err
	}
	b.Written = append(b.Written, name)
	return nil
}

// writeAtomic replaces name atomically (temporary file, fsync, rename).
func writeAtomic(name string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", name, err)
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	return nil
}

// ServingTLS returns the gateway's TLS configuration: the serving
// certificate, client certificates verified against the CA when given
// (authentication decides what to do without one), TLS 1.2 or newer, and
// ALPN "http/1.1" only — fasthttp does not speak HTTP/2, so h2 is never
// advertised.
func (b *Bundle) ServingTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(b.ServingCertFile, b.ServingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(b.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cannot load CA %s: %w", b.CAFile, errNoCertificates)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert, // authn verifies, so a bad cert is a 401, not a failed handshake
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}, nil
}

var errNoCertificates = errors.New("no PEM certificates")
