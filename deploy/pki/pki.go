// Package pki creates and reuses the certificates and the admin kubeconfig
// that `kgate dev` keeps in its data directory: a self-signed CA, a serving
// certificate for the gateway, an admin client certificate (system:masters)
// and a kubeconfig for kubectl and client-go. Ensure loads what is on disk
// and regenerates only what is missing, invalid or about to expire.
package pki

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Errors returned by Ensure and Bundle.
var (
	// ErrInvalidConfig: Config is missing a field or has a bad value.
	ErrInvalidConfig = errors.New("pki: invalid config")
)

// File names inside Config.Dir.
const (
	CAFileName          = "ca.crt"
	CAKeyFileName       = "ca.key"
	ServingCertFileName = "serving.crt"
	ServingKeyFileName  = "serving.key"
	AdminCertFileName   = "admin.crt"
	AdminKeyFileName    = "admin.key"
	KubeconfigFileName  = "kubeconfig"
)

// Identities in the certificates and names in the kubeconfig.
const (
	// AdminUser is the admin certificate's common name (the user name).
	AdminUser = "kgate-admin"
	// AdminGroup is the admin certificate's organization (its group).
	AdminGroup = "system:masters"
	// KubeconfigContext names the kubeconfig's context (the current one)
	// and its cluster; its user is AdminUser.
	KubeconfigContext = "kgate"
)

const (
	caCommonName      = "kgate-ca"
	servingCommonName = "kgate-serving"
	caValidity        = 10 * 365 * 24 * time.Hour
	leafValidity      = 365 * 24 * time.Hour
	// renewBefore: a certificate that expires sooner than this is renewed.
	renewBefore = 30 * 24 * time.Hour
	// backdate: NotBefore is set this far in the past to tolerate clock
	// skew between the machine that made a certificate and its users.
	backdate     = time.Hour
	keyFileMode  = 0o600
	certFileMode = 0o644
	dirMode      = 0o700
)

// defaultHosts returns the serving certificate's names when Config.Hosts
// is empty.
func defaultHosts() []string { return []string{"127.0.0.1", "::1", "localhost"} }

// Config says where the files live and what the serving certificate covers.
type Config struct {
	// Dir holds all files; created (0700) if missing. Required.
	Dir string
	// Hosts are the IP addresses and DNS names of the serving certificate.
	// Default: 127.0.0.1, ::1, localhost.
	Hosts []string
	// ServerURL is the https:// URL written into the kubeconfig. Its host
	// must be one of Hosts. Required.
	ServerURL string
	// Now is the clock used for validity checks and new certificates.
	// Default: time.Now.
	Now func() time.Time
}

// validate checks cfg and fills in defaults.
func (cfg *Config) validate() error {
	if cfg.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	}
	if len(cfg.Hosts) == 0 {
		cfg.Hosts = defaultHosts()
	}
	if err := validateHosts(cfg.Hosts); err != nil {
		return err
	}
	if cfg.ServerURL == "" {
		return fmt.Errorf("%w: ServerURL is required", ErrInvalidConfig)
	}
	u, err := url.Parse(cfg.ServerURL)
	if err != nil {
		return fmt.Errorf("%w: ServerURL: %w", ErrInvalidConfig, err)
	}
	if u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("%w: ServerURL %q is not an https:// URL with a host", ErrInvalidConfig, cfg.ServerURL)
	}
	if !coversHost(cfg.Hosts, u.Hostname()) {
		return fmt.Errorf("%w: ServerURL host %q is not one of Hosts %v", ErrInvalidConfig, u.Hostname(), cfg.Hosts)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return nil
}

// validateHosts fails unless each host is an IP address or a DNS name.
func validateHosts(hosts []string) error {
	for _, h := range hosts {
		if net.ParseIP(h) != nil {
			continue
		}
		if len(validation.IsDNS1123Subdomain(h)) > 0 && len(validation.IsWildcardDNS1123Subdomain(h)) > 0 {
			return fmt.Errorf("%w: host %q is neither an IP address nor a DNS name", ErrInvalidConfig, h)
		}
	}
	return nil
}

// coversHost reports whether host is among hosts (IPs compared as IPs).
func coversHost(hosts []string, host string) bool {
	ip := net.ParseIP(host)
	for _, h := range hosts {
		if h == host {
			return true
		}
		if ip != nil && ip.Equal(net.ParseIP(h)) {
			return true
		}
	}
	return false
}

// Bundle is the set of files Ensure made sure of.
type Bundle struct {
	CAFile          string
	ServingCertFile string
	ServingKeyFile  string
	AdminCertFile   string
	AdminKeyFile    string
	KubeconfigFile  string
	// Written lists the files this Ensure call (re)wrote; empty when
	// everything on disk was reused.
	Written []string
}

func newBundle(dir string) *Bundle {
	return &Bundle{
		CAFile:          filepath.Join(dir, CAFileName),
		ServingCertFile: filepath.Join(dir, ServingCertFileName),
		ServingKeyFile:  filepath.Join(dir, ServingKeyFileName),
		AdminCertFile:   filepath.Join(dir, AdminCertFileName),
		AdminKeyFile:    filepath.Join(dir, AdminKeyFileName),
		KubeconfigFile:  filepath.Join(dir, KubeconfigFileName),
	}
}
