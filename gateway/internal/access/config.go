package access

import (
	"errors"
	"time"

	"github.com/kgate/kgate/gateway/internal/oidc"
)

// Config are the authentication and authorization settings, as
// kube-apiserver's flags.
type Config struct {
	// ClientCAFile verifies client certificates (x509 authentication).
	ClientCAFile string
	// TokenAuthFile is a kube-apiserver static token file.
	TokenAuthFile string
	// AnonymousAuth admits requests without credentials as
	// system:anonymous.
	AnonymousAuth bool
	// AuthorizationModes are the --authorization-mode values, asked in
	// order after system:masters: Node, RBAC, AlwaysAllow, AlwaysDeny,
	// Webhook. Default RBAC; production gateways use Node,RBAC.
	AuthorizationModes []string
	// AuthorizationWebhook configures mode Webhook.
	AuthorizationWebhook AuthorizationWebhookConfig
	// ServiceAccountIssuers are the --service-account-issuer values: the
	// first is written into issued tokens, all are accepted. Required
	// with either key option.
	ServiceAccountIssuers []string
	// ServiceAccountKeyFiles hold the keys verifying service-account
	// tokens (--service-account-key-file); the signing key's public half
	// is added.
	ServiceAccountKeyFiles []string
	// ServiceAccountSigningKeyFile signs TokenRequest tokens
	// (--service-account-signing-key-file); without it TokenRequest is 404.
	ServiceAccountSigningKeyFile string
	// APIAudiences are the audiences of the API (--api-audiences).
	// Default: ServiceAccountIssuers.
	APIAudiences []string
	// AggregateClusterRoles writes the rules of aggregated ClusterRoles
	// into their stored objects (kube-controller-manager's
	// clusterrole-aggregation controller), for clusters without a
	// controller manager. Needs the RBAC mode.
	AggregateClusterRoles bool
	// OIDC accepts ID tokens of an OpenID Connect issuer (--oidc-*).
	OIDC OIDCConfig
	// RequestHeader trusts front proxies' identity headers
	// (--requestheader-*).
	RequestHeader RequestHeaderConfig
}

// AuthorizationWebhookConfig is kube-apiserver's --authorization-webhook-*
// flags: how mode Webhook reaches its service.
type AuthorizationWebhookConfig struct {
	// ConfigFile is the kubeconfig of the service
	// (--authorization-webhook-config-file); required with mode Webhook.
	ConfigFile string
	// Version is the SubjectAccessReview version sent, v1 (default) or
	// v1beta1 (--authorization-webhook-version).
	Version string
	// CacheAuthorizedTTL and CacheUnauthorizedTTL are how long allowed and
	// not allowed answers are cached (--authorization-webhook-cache-*-ttl):
	// zero means the default (5m, 30s), negative no caching.
	CacheAuthorizedTTL   time.Duration
	CacheUnauthorizedTTL time.Duration
	// Timeout bounds each decision, retries included. Default 30s.
	Timeout time.Duration
}

// OIDCConfig are kube-apiserver's --oidc-* options: ID tokens of one
// OpenID Connect issuer are bearer tokens too. Off without IssuerURL.
type OIDCConfig struct {
	// IssuerURL (https) must be the tokens' iss; ClientID one of their
	// audiences. Both required together.
	IssuerURL, ClientID string
	// UsernameClaim defaults to "sub". UsernamePrefix defaults to
	// IssuerURL + "#" unless the claim is "email"; "-" means none.
	UsernameClaim, UsernamePrefix string
	// GroupsClaim names the groups claim, each group prefixed with
	// GroupsPrefix. Optional.
	GroupsClaim, GroupsPrefix string
	// RequiredClaims must be in every token with these values.
	RequiredClaims map[string]string
	// SigningAlgs accepted; default RS256.
	SigningAlgs []string
	// JWKSFile holds the issuer's public keys (kgate does not fetch its
	// discovery document); required. Re-read when it changes.
	JWKSFile string
}

// OIDCSigningAlgs are the algorithms OIDCConfig.SigningAlgs may name.
func OIDCSigningAlgs() []string { return oidc.AllSigningAlgs() }

// set reports whether any option is given.
func (o *OIDCConfig) set() bool {
	return o.IssuerURL != "" || o.ClientID != "" || o.UsernamePrefix != "" || o.GroupsClaim != "" ||
		o.GroupsPrefix != "" || len(o.RequiredClaims) > 0 || o.JWKSFile != ""
}

// RequestHeaderConfig are kube-apiserver's --requestheader-* options: a
// front proxy with a client certificate from ClientCAFile (and a CN in
// AllowedNames, if any) names the user in headers. Off without
// ClientCAFile; the header lists default to X-Remote-User, none,
// X-Remote-Group and X-Remote-Extra-.
type RequestHeaderConfig struct {
	ClientCAFile        string
	AllowedNames        []string
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// set reports whether any option is given.
func (o *RequestHeaderConfig) set() bool {
	return o.ClientCAFile != "" || len(o.AllowedNames) > 0 || len(o.UsernameHeaders) > 0 || len(o.UIDHeaders) > 0 ||
		len(o.GroupHeaders) > 0 || len(o.ExtraHeaderPrefixes) > 0
}

// validate checks what New cannot tell: options given without the one
// that turns their feature on.
func (c *Config) validate() error {
	if c.OIDC.set() && c.OIDC.IssuerURL == "" {
		return errors.New("cannot make gateway: the OIDC options need an issuer URL (--oidc-issuer-url)")
	}
	if c.RequestHeader.set() && c.RequestHeader.ClientCAFile == "" {
		return errors.New("cannot make gateway: the request-header options need a client CA file (--requestheader-client-ca-file)")
	}
	if (len(c.ServiceAccountKeyFiles) > 0 || c.ServiceAccountSigningKeyFile != "") && len(c.ServiceAccountIssuers) == 0 {
		return errors.New("cannot make gateway: service-account keys need a service-account issuer")
	}
	return nil
}
