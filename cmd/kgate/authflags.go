package main

import (
	"flag"
	"strings"
	"time"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
)

// authFlags are the authorization and service-account flags of
// kube-apiserver that `kgate gateway` and `kgate dev` take.
type authFlags struct {
	modes   *string
	webhook struct {
		configFile               *string
		version                  *string
		authorizedTTL, deniedTTL *time.Duration
	}
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
		modes: fs.String("authorization-mode", "RBAC", "authorization modes asked in order, comma-separated: RBAC, AlwaysAllow, AlwaysDeny, Webhook"),
	}
	a.webhook.configFile = fs.String("authorization-webhook-config-file", "", "kubeconfig of the authorization webhook (its server, CA and the credentials to present); required with mode Webhook")
	a.webhook.version = fs.String("authorization-webhook-version", "v1", "authorization.k8s.io version of the SubjectAccessReview sent to the webhook: v1 or v1beta1")
	a.webhook.authorizedTTL = fs.Duration("authorization-webhook-cache-authorized-ttl", 5*time.Minute, "how long the webhook's allowed answers are cached (0: not cached)")
	a.webhook.deniedTTL = fs.Duration("authorization-webhook-cache-unauthorized-ttl", 30*time.Second, "how long the webhook's denied and no-opinion answers are cached (0: not cached)")
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

// webhookConfig is mode Webhook's options, or none when the mode is not
// chosen and the file not given (the gateway rejects a file without the
// mode). A TTL of 0 turns caching off, as in kube-apiserver.
func (a *authFlags) webhookConfig() gateway.AuthorizationWebhookConfig {
	modes := a.modeList()
	webhook := false
	for _, m := range modes {
		webhook = webhook || m == "Webhook"
	}
	if !webhook && *a.webhook.configFile == "" {
		return gateway.AuthorizationWebhookConfig{}
	}
	ttl := func(d time.Duration) time.Duration {
		if d <= 0 {
			return -1
		}
		return d
	}
	return gateway.AuthorizationWebhookConfig{
		ConfigFile: *a.webhook.configFile, Version: *a.webhook.version,
		CacheAuthorizedTTL: ttl(*a.webhook.authorizedTTL), CacheUnauthorizedTTL: ttl(*a.webhook.deniedTTL),
	}
}

// gateway sets the gateway's options.
func (a *authFlags) gateway(cfg *gateway.Config) {
	cfg.AuthorizationModes = a.modeList()
	cfg.AuthorizationWebhook = a.webhookConfig()
	cfg.ServiceAccountKeyFiles, cfg.ServiceAccountSigningKeyFile = a.keyFiles, *a.signingKey
	cfg.ServiceAccountIssuers, cfg.APIAudiences = a.issuers, a.audiences
	cfg.AggregateClusterRoles = *a.aggregate
}

// dev sets kgate dev's options.
func (a *authFlags) dev(cfg *devcluster.Config) {
	cfg.AuthorizationModes = a.modeList()
	cfg.AuthorizationWebhook = a.webhookConfig()
	cfg.ServiceAccountKeyFiles, cfg.ServiceAccountSigningKeyFile = a.keyFiles, *a.signingKey
	cfg.ServiceAccountIssuers, cfg.APIAudiences = a.issuers, a.audiences
}
