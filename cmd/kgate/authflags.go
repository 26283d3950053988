package main

import (
	"flag"
	"strings"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
)

// authFlags are the authorization and service-account flags of
// kube-apiserver that `kgate gateway` and `kgate dev` take.
type authFlags struct {
	modes      *string
	keyFiles   listFlag
	signingKey *string
	issuers    listFlag
	audiences  listFlag
	aggregate  *bool
}

// listFlag is a flag given several times or as a comma list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func addAuthFlags(fs *flag.FlagSet, dev bool) *authFlags {
	a := &authFlags{
		modes: fs.String("authorization-mode", "RBAC", "authorization modes asked in order, comma-separated: RBAC, AlwaysAllow, AlwaysDeny"),
	}
	signing, issuer := "key signing service-account tokens (PEM, RSA or ECDSA); without it TokenRequest is not served",
		"service-account token issuer (repeatable): the first is written into tokens, all are accepted; required with a key"
	if dev {
		signing = "key signing service-account tokens (PEM); default: sa.key in --data-dir, generated at the first start"
		issuer = "service-account token issuer (repeatable; default " + devcluster.DefaultServiceAccountIssuer + ")"
	}
	a.signingKey = fs.String("service-account-signing-key-file", "", signing)
	fs.Var(&a.keyFiles, "service-account-key-file", "keys verifying service-account tokens (PEM public or private keys, certificates; repeatable); the signing key is added")
	fs.Var(&a.issuers, "service-account-issuer", issuer)
	fs.Var(&a.audiences, "api-audiences", "audiences of the API that service-account tokens must carry one of (comma-separated; default: the issuers)")
	if !dev {
		a.aggregate = fs.Bool("aggregate-cluster-roles", false, "write the rules of aggregated ClusterRoles into them, as kube-controller-manager's clusterrole-aggregation controller (for clusters without one; kgate dev always does)")
	}
	return a
}

func (a *authFlags) modeList() []string {
	var l listFlag
	_ = l.Set(*a.modes)
	return l
}

// gateway sets the gateway's options.
func (a *authFlags) gateway(cfg *gateway.Config) {
	cfg.AuthorizationModes = a.modeList()
	cfg.ServiceAccountKeyFiles, cfg.ServiceAccountSigningKeyFile = a.keyFiles, *a.signingKey
	cfg.ServiceAccountIssuers, cfg.APIAudiences = a.issuers, a.audiences
	cfg.AggregateClusterRoles = *a.aggregate
}

// dev sets kgate dev's options.
func (a *authFlags) dev(cfg *devcluster.Config) {
	cfg.AuthorizationModes = a.modeList()
	cfg.ServiceAccountKeyFiles, cfg.ServiceAccountSigningKeyFile = a.keyFiles, *a.signingKey
	cfg.ServiceAccountIssuers, cfg.APIAudiences = a.issuers, a.audiences
}
