package devcluster

import (
	"path/filepath"

	"github.com/kgate/kgate/gateway"
)

// DefaultServiceAccountIssuer is kgate dev's service-account issuer, the
// in-cluster API address kubeadm clusters use.
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// ServiceAccountKeyFileName is the signing key kgate dev generates in its
// data directory when none is given.
const ServiceAccountKeyFileName = "sa.key"

// serviceAccountDefaults fills the service-account options: a signing
// key in the data directory (made at the first start) and the default
// issuer.
func (cfg *Config) serviceAccountDefaults() error {
	if cfg.ServiceAccountSigningKeyFile == "" {
		cfg.ServiceAccountSigningKeyFile = filepath.Join(cfg.DataDir, ServiceAccountKeyFileName)
		if err := gateway.EnsureServiceAccountSigningKey(cfg.ServiceAccountSigningKeyFile); err != nil {
			return err
		}
	}
	if len(cfg.ServiceAccountIssuers) == 0 {
		cfg.ServiceAccountIssuers = []string{DefaultServiceAccountIssuer}
	}
	return nil
}
