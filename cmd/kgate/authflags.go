package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
)

// authFlags are the authorization, service-account, OIDC and
// request-header flags of kube-apiserver that `kgate gateway` and
// `kgate dev` take.
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
	recount    *time.Duration
	// enablePlugins, disablePlugins: --enable-admission-plugins,
	// --disable-admission-plugins.
	enablePlugins, disablePlugins listFlag

	oidc          gateway.OIDCConfig
	requestHeader gateway.RequestHeaderConfig
}

// mapFlag is a key=value flag given several times or as a comma list.
type mapFlag map[string]string

func (m *mapFlag) String() string {
	var l []string
	for k, v := range *m {
		l = append(l, k+"="+v)
	}
	slices.Sort(l)
	return strings.Join(l, ",")
}

func (m *mapFlag) Set(v string) error {
	if *m == nil {
		*m = map[string]string{}
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, val, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", s)
		}
		(*m)[k] = val
	}
	return nil
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
		// Node,RBAC as kube-apiserver's deployments recommend: kubelets
		// limited to their node's objects, everyone else by RBAC.
		modes: fs.String("authorization-mode", "Node,RBAC", "authorization modes asked in order, comma-separated: Node, RBAC, AlwaysAllow, AlwaysDeny, Webhook"),
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
	recount := time.Duration(0)
	if dev {
		recount = time.Minute
	}
	a.recount = fs.Duration("quota-recount-interval", recount, "recount every ResourceQuota's status.used from the objects this often, as kube-controller-manager's resourcequota controller (0: off; for clusters without one)")
	fs.Var(&a.enablePlugins, "enable-admission-plugins", "admission plugins to enable besides the default ones ("+strings.Join(gateway.DefaultAdmissionPlugins(), ", ")+"); comma-separated, by kube-apiserver's names; the order does not matter")
	fs.Var(&a.disablePlugins, "disable-admission-plugins", "admission plugins to disable although on by default; comma-separated; the order does not matter")
	if !dev {
		a.aggregate = fs.Bool("aggregate-cluster-roles", false, "write the rules of aggregated ClusterRoles into them, as kube-controller-manager's clusterrole-aggregation controller (for clusters without one; kgate dev always does)")
	}

	o := &a.oidc
	fs.StringVar(&o.IssuerURL, "oidc-issuer-url", "", "https URL of an OpenID Connect issuer whose ID tokens are accepted as bearer tokens (needs --oidc-client-id and --oidc-jwks-file)")
	fs.StringVar(&o.ClientID, "oidc-client-id", "", "client ID the ID tokens must have as an audience")
	fs.StringVar(&o.UsernameClaim, "oidc-username-claim", "sub", "ID token claim naming the user")
	fs.StringVar(&o.UsernamePrefix, "oidc-username-prefix", "", `prefix of OIDC usernames; default the issuer URL and "#" unless the claim is email; "-" for none`)
	fs.StringVar(&o.GroupsClaim, "oidc-groups-claim", "", "ID token claim with the user's groups (string or array of strings)")
	fs.StringVar(&o.GroupsPrefix, "oidc-groups-prefix", "", "prefix of OIDC groups")
	fs.Var((*mapFlag)(&o.RequiredClaims), "oidc-required-claim", "key=value claim every ID token must carry (repeatable)")
	fs.Var((*listFlag)(&o.SigningAlgs), "oidc-signing-algs", "accepted ID token signature algorithms, comma-separated, of "+strings.Join(gateway.OIDCSigningAlgs(), ", ")+" (default RS256)")
	fs.StringVar(&o.JWKSFile, "oidc-jwks-file", "", "the issuer's JSON Web Key Set (what its jwks_uri serves); kgate does not fetch it, and re-reads the file when it changes")

	rh := &a.requestHeader
	fs.StringVar(&rh.ClientCAFile, "requestheader-client-ca-file", "", "CA bundle verifying front proxies' client certificates; turns request-header authentication on")
	fs.Var((*listFlag)(&rh.AllowedNames), "requestheader-allowed-names", "client certificate CNs allowed as front proxies (comma-separated; default: any signed by the request-header CA)")
	fs.Var((*listFlag)(&rh.UsernameHeaders), "requestheader-username-headers", "headers naming the user, the first non-empty wins (default X-Remote-User)")
	fs.Var((*listFlag)(&rh.UIDHeaders), "requestheader-uid-headers", "headers with the user's UID, e.g. X-Remote-Uid (default none)")
	fs.Var((*listFlag)(&rh.GroupHeaders), "requestheader-group-headers", "headers with the user's groups (default X-Remote-Group)")
	fs.Var((*listFlag)(&rh.ExtraHeaderPrefixes), "requestheader-extra-headers-prefix", "header prefixes of the user's extra attributes (default X-Remote-Extra-)")
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
	if !slices.Contains(a.modeList(), "Webhook") && *a.webhook.configFile == "" {
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
	ac := &cfg.Auth
	ac.AuthorizationModes = a.modeList()
	ac.AuthorizationWebhook = a.webhookConfig()
	ac.ServiceAccountKeyFiles, ac.ServiceAccountSigningKeyFile = a.keyFiles, *a.signingKey
	ac.ServiceAccountIssuers, ac.APIAudiences = a.issuers, a.audiences
	ac.AggregateClusterRoles = *a.aggregate
	cfg.QuotaRecountInterval = *a.recount
	cfg.EnableAdmissionPlugins, cfg.DisableAdmissionPlugins = a.enablePlugins, a.disablePlugins
	ac.OIDC, ac.RequestHeader = a.oidc, a.requestHeader
}

// dev sets kgate dev's options.
func (a *authFlags) dev(cfg *devcluster.Config) {
	cfg.AuthorizationModes = a.modeList()
	cfg.AuthorizationWebhook = a.webhookConfig()
	cfg.ServiceAccountKeyFiles, cfg.ServiceAccountSigningKeyFile = a.keyFiles, *a.signingKey
	cfg.ServiceAccountIssuers, cfg.APIAudiences = a.issuers, a.audiences
	cfg.OIDC, cfg.RequestHeader = a.oidc, a.requestHeader
	cfg.QuotaRecountInterval = *a.recount
	cfg.EnableAdmissionPlugins, cfg.DisableAdmissionPlugins = a.enablePlugins, a.disablePlugins
}
