package gateway

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/authn"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/authz/webhook"
	"github.com/kgate/kgate/gateway/internal/oidc"
	"github.com/kgate/kgate/gateway/internal/rbacfeed"
	"github.com/kgate/kgate/gateway/internal/review"
	"github.com/kgate/kgate/gateway/internal/satoken"
	"github.com/kgate/kgate/storage"
)

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

// validateAuthn checks what newAuth cannot tell: options given without
// the one that turns their feature on.
func (c *Config) validateAuthn() error {
	if c.OIDC.set() && c.OIDC.IssuerURL == "" {
		return errors.New("cannot make gateway: the OIDC options need an issuer URL (--oidc-issuer-url)")
	}
	if c.RequestHeader.set() && c.RequestHeader.ClientCAFile == "" {
		return errors.New("cannot make gateway: the request-header options need a client CA file (--requestheader-client-ca-file)")
	}
	return nil
}

// withRequestHeaderCAs adds the request-header CAs to the client CAs the
// TLS handshake advertises, when it advertises some: a Go client (and
// most others) sends only a certificate issued by one of them, so a
// front proxy's would never arrive.
func withRequestHeaderCAs(c *tls.Config, caFile string) error {
	if caFile == "" || c.ClientCAs == nil {
		return nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("cannot read request-header client CA file: %w", err)
	}
	pool := c.ClientCAs.Clone()
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("cannot parse request-header client CA file %s: no certificates", caFile)
	}
	c.ClientCAs = pool
	return nil
}

// authState is the gateway's authentication and authorization beyond
// authn: the authorizer chain, the RBAC authorizer and its feed, the
// escalation checks, service-account tokens and the review APIs.
type authState struct {
	authorizer authz.Authorizer
	selectors  bool           // an authorizer looks at field and label selectors (the webhook)
	rbac       *authz.RBAC    // always present: escalation checks read it
	feed       *rbacfeed.Feed // nil unless a mode is RBAC
	escalation *authz.Escalation
	tokens     *satoken.Tokens // nil without service-account keys
	review     *review.Handler
	adm        *admissionState // admission chain and its feed (admission_chain.go)
	aggregator *loop           // nil unless Config.AggregateClusterRoles (aggregation.go)
}

// newAuth builds authentication and authorization from the config. It
// runs in New once the router, hub, codec and base context exist.
func (g *Gateway) newAuth() error {
	cfg := &g.cfg
	var tokenAuths []authenticator.Token
	var audiences []string
	if len(cfg.ServiceAccountKeyFiles) > 0 || cfg.ServiceAccountSigningKeyFile != "" {
		if len(cfg.ServiceAccountIssuers) == 0 {
			return errors.New("cannot make gateway: service-account keys need a service-account issuer")
		}
		keys, err := satoken.LoadPublicKeys(cfg.ServiceAccountKeyFiles...)
		if err != nil {
			return fmt.Errorf("cannot make gateway: %w", err)
		}
		var signer crypto.Signer
		if cfg.ServiceAccountSigningKeyFile != "" {
			if signer, err = satoken.LoadSigningKey(cfg.ServiceAccountSigningKeyFile); err != nil {
				return fmt.Errorf("cannot make gateway: %w", err)
			}
		}
		if g.auth.tokens, err = satoken.New(satoken.Config{
			Issuers: cfg.ServiceAccountIssuers, Audiences: cfg.APIAudiences, Keys: keys, SigningKey: signer,
			Lookup: objectLookup{g},
		}); err != nil {
			return fmt.Errorf("cannot make gateway: %w", err)
		}
		tokenAuths = append(tokenAuths, g.auth.tokens)
		audiences = g.auth.tokens.Audiences()
	}
	if o := cfg.OIDC; o.IssuerURL != "" {
		// After the service-account tokens, as in kube-apiserver; a token
		// of another issuer is not the OIDC authenticator's.
		tok, err := oidc.New(g.base, oidc.Config{
			IssuerURL: o.IssuerURL, ClientID: o.ClientID, UsernameClaim: o.UsernameClaim, UsernamePrefix: o.UsernamePrefix,
			GroupsClaim: o.GroupsClaim, GroupsPrefix: o.GroupsPrefix, RequiredClaims: o.RequiredClaims,
			SigningAlgs: o.SigningAlgs, JWKSFile: o.JWKSFile, DisallowedIssuers: cfg.ServiceAccountIssuers,
			Logger: cfg.Logger.With("component", "oidc"),
		})
		if err != nil {
			return fmt.Errorf("cannot make gateway: %w", err)
		}
		if len(audiences) > 0 {
			tokenAuths = append(tokenAuths, authenticator.WrapAudienceAgnosticToken(audiences, tok))
		} else {
			tokenAuths = append(tokenAuths, tok)
		}
	}
	rh := cfg.RequestHeader
	var err error
	if g.authn, err = authn.New(authn.Config{
		ClientCAFile: cfg.ClientCAFile, TokenAuthFile: cfg.TokenAuthFile, Anonymous: cfg.AnonymousAuth,
		Tokens: tokenAuths, APIAudiences: audiences,
		RequestHeader: authn.RequestHeaderConfig{
			ClientCAFile: rh.ClientCAFile, AllowedNames: rh.AllowedNames, UsernameHeaders: rh.UsernameHeaders,
			UIDHeaders: rh.UIDHeaders, GroupHeaders: rh.GroupHeaders, ExtraHeaderPrefixes: rh.ExtraHeaderPrefixes,
		},
		Logger: cfg.Logger.With("component", "authn"),
	}); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	g.auth.rbac = authz.NewRBAC()
	ac := authz.Config{Modes: cfg.AuthorizationModes}
	if ac.Webhook, err = g.newAuthzWebhook(); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	g.auth.selectors = ac.Webhook != nil
	if g.auth.authorizer, err = authz.New(ac, g.auth.rbac); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	g.auth.escalation = authz.NewEscalation(g.auth.authorizer, g.auth.rbac)
	if g.rbacMode() {
		if g.auth.feed, err = rbacfeed.New(rbacfeed.Config{
			Registry: cfg.Registry, Ranges: cfg.Ranges, Cache: g.router, Hub: g.hub, Revisions: cfg.Revisions,
			Codec: cfg.Codec, RBAC: g.auth.rbac, Logger: cfg.Logger.With("component", "rbacfeed"),
		}); err != nil {
			return fmt.Errorf("cannot make gateway: %w", err)
		}
	}
	rc := review.Config{
		Codec: g.codec, Authorizer: g.auth.authorizer, Rules: ruleResolver{g}, Tokens: g.authn,
		APIAudiences: audiences, Objects: objectGetter{g},
	}
	if g.auth.tokens != nil && g.auth.tokens.CanIssue() {
		rc.Issuer = g.auth.tokens
	}
	if g.auth.review, err = review.New(g.base, rc); err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	return g.newAdmission()
}

// newAuthzWebhook builds mode Webhook's authorizer when it is one of the
// modes; nil otherwise. Webhook options without the mode are an error,
// as a config file given with a typo in --authorization-mode would
// otherwise be ignored.
func (g *Gateway) newAuthzWebhook() (authz.Authorizer, error) {
	wc := g.cfg.AuthorizationWebhook
	if !slices.Contains(g.cfg.AuthorizationModes, authz.ModeWebhook) {
		if wc != (AuthorizationWebhookConfig{}) {
			return nil, errors.New("authorization webhook options need Webhook in the authorization modes")
		}
		return nil, nil
	}
	if wc.ConfigFile == "" {
		return nil, errors.New("authorization mode Webhook needs an authorization webhook config file")
	}
	m, err := webhook.NewMetrics(g.cfg.Metrics)
	if err != nil {
		return nil, err
	}
	w, err := webhook.New(g.base, webhook.Config{
		ConfigFile: wc.ConfigFile, Version: wc.Version,
		AuthorizedTTL: wc.CacheAuthorizedTTL, UnauthorizedTTL: wc.CacheUnauthorizedTTL, Timeout: wc.Timeout,
		Logger: g.cfg.Logger.With("component", "authz-webhook"), Metrics: m,
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// rbacMode reports whether RBAC is one of the authorization modes (the
// default).
func (g *Gateway) rbacMode() bool {
	return len(g.cfg.AuthorizationModes) == 0 || slices.Contains(g.cfg.AuthorizationModes, authz.ModeRBAC)
}

// startAuth starts the RBAC feed (Run, after bootstrap).
func (g *Gateway) startAuth() {
	if g.auth.feed != nil {
		g.auth.feed.Start()
		if g.cfg.AggregateClusterRoles {
			g.auth.aggregator = startLoop(aggregationInterval, aggregator{g}.round)
		}
	}
	g.auth.adm.feed.Start()
	if n := g.cfg.QuotaRecountInterval; n > 0 {
		g.auth.adm.recounter = startLoop(n, g.recountQuotas)
	}
}

// stopAuth stops the RBAC feed (shutdown).
func (g *Gateway) stopAuth() {
	g.auth.aggregator.stop()
	g.auth.adm.recounter.stop()
	if g.auth.feed != nil {
		g.auth.feed.Close()
	}
	g.auth.adm.feed.Close()
}

// rbacReady is the /readyz check "rbac": every role and binding listed.
func (g *Gateway) rbacReady(ctx context.Context) error {
	if g.auth.feed == nil {
		return nil
	}
	return g.auth.feed.Ready(ctx)
}

// ruleResolver lists a user's rules for SelfSubjectRulesReview, as
// kube-apiserver's rule resolvers: all of them under AlwaysAllow, the
// RBAC rules under RBAC, in mode order. Under Webhook the list is
// incomplete: the webhook can only answer single requests.
type ruleResolver struct{ g *Gateway }

var everything = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func (r ruleResolver) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	modes := r.g.cfg.AuthorizationModes
	if len(modes) == 0 {
		modes = []string{authz.ModeRBAC}
	}
	var rules []rbacv1.PolicyRule
	var errs []error
	incomplete := false
	for _, m := range modes {
		switch m {
		case authz.ModeWebhook:
			incomplete = true
			errs = append(errs, errWebhookRules)
		case authz.ModeAlwaysAllow:
			rules = append(rules, everything...)
		case authz.ModeRBAC:
			rs, err := r.g.auth.rbac.RulesFor(u, namespace)
			rules = append(rules, rs...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return rules, incomplete, errors.Join(errs...)
}

// errWebhookRules is upstream's webhook RulesFor error, shown in the
// review's evaluationError.
var errWebhookRules = errors.New("webhook authorizer does not support user rule resolution")

// objectLookup finds service accounts and the objects tokens are bound to
// for token verification: from the cache nodes, read as they are now;
// something not found is read again consistently, so a token issued for
// an object just created works at once.
type objectLookup struct{ g *Gateway }

func (l objectLookup) Object(ctx context.Context, resource, namespace, name string) (satoken.Object, error) {
	res, ok := l.g.cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource(resource))
	if !ok {
		return satoken.Object{}, fmt.Errorf("cannot look up %s: not served", resource)
	}
	key := res.Key(namespace, name)
	rng, ok := l.g.cfg.Ranges.Current().Lookup(key)
	if !ok {
		return satoken.Object{}, fmt.Errorf("cannot find the range of %s", key)
	}
	obj, err := l.g.router.Get(ctx, rng.ID, key, client.Read{}, client.JSON)
	if errors.Is(err, storage.ErrNotFound) {
		var cur int64
		if cur, err = l.g.cfg.Revisions.Current(ctx); err == nil {
			obj, err = l.g.router.Get(ctx, rng.ID, key, client.Read{ResourceVersion: cur, Match: string(metav1.ResourceVersionMatchNotOlderThan)}, client.JSON)
		}
	}
	if errors.Is(err, storage.ErrNotFound) {
		return satoken.Object{}, fmt.Errorf("%s %s/%s: %w", resource, namespace, name, satoken.ErrNotFound)
	}
	if err != nil {
		return satoken.Object{}, err
	}
	var m struct {
		Metadata struct {
			UID               string       `json:"uid"`
			DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj.Data, &m); err != nil {
		return satoken.Object{}, fmt.Errorf("cannot decode %s: %w", key, err)
	}
	out := satoken.Object{UID: m.Metadata.UID}
	if m.Metadata.DeletionTimestamp != nil {
		t := m.Metadata.DeletionTimestamp.Time
		out.DeletionTimestamp = &t
	}
	return out, nil
}

// objectGetter reads the objects a TokenRequest refers to from etcd
// (consistent, as kube-apiserver's TokenRequest).
type objectGetter struct{ g *Gateway }

func (o objectGetter) Get(ctx context.Context, resource, namespace, name string) (runtime.Object, error) {
	res, ok := o.g.cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource(resource))
	if !ok {
		return nil, fmt.Errorf("cannot read %s: not served", resource)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return o.g.cfg.Store.Get(ctx, res, namespace, name, 0)
}

// EnsureServiceAccountSigningKey writes a new service-account signing key
// (RSA, PEM, mode 0600) to file unless the file exists, and checks that
// it loads. kgate dev keeps one in its data directory.
func EnsureServiceAccountSigningKey(file string) error {
	_, err := satoken.EnsureSigningKey(file)
	return err
}
