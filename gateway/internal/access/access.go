// Package access is the gateway's authentication and authorization: the
// authenticators (x509, tokens, service accounts, OIDC, request headers),
// the authorizer modes with the RBAC authorizer and the feed keeping it
// current, the Node authorizer with its graph's feed, impersonation, RBAC escalation checks, service-account tokens,
// the review APIs answered in the gateway, and the ClusterRole aggregation
// for clusters without a controller manager.
package access

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/authn"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/authz/node"
	"github.com/kgate/kgate/gateway/internal/authz/webhook"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/loop"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/oidc"
	"github.com/kgate/kgate/gateway/internal/rbacfeed"
	"github.com/kgate/kgate/gateway/internal/review"
	"github.com/kgate/kgate/gateway/internal/satoken"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// Cache reads objects and pages of ranges from the cache nodes
// (route.Router).
type Cache interface {
	feed.Lister
	Get(ctx context.Context, rangeID, key string, rd client.Read, f client.Format) (client.Object, error)
}

// Deps are what access reads through; all required.
type Deps struct {
	Registry  *registry.Registry
	Ranges    ranges.Source
	Codec     *codec.Codec
	Store     *storage.Store
	Cache     Cache
	Hub       feed.Watcher
	Revisions feed.Revisions
	// Negotiate encodes the review APIs' answers.
	Negotiate *negotiate.Codec
	Logger    *slog.Logger
	Metrics   prometheus.Registerer
}

// Access authenticates and authorizes requests.
type Access struct {
	cfg    Config
	d      Deps
	ctx    context.Context // ends with Close: OIDC keys, the webhook, reviews
	cancel context.CancelFunc

	authn      *authn.Authenticator
	authorizer authz.Authorizer
	selectors  bool             // an authorizer looks at field and label selectors (the webhook, Node)
	rbac       *authz.RBAC      // always present: escalation checks read it
	feed       *rbacfeed.Feed   // nil unless a mode is RBAC
	node       *node.Authorizer // nil unless a mode is Node
	escalation *authz.Escalation
	tokens     *satoken.Tokens // nil without service-account keys
	review     *review.Handler
	aggregator *loop.Loop // nil unless started with Config.AggregateClusterRoles
}

// New builds authentication and authorization; Start starts the RBAC
// feed, Close stops everything.
func New(cfg Config, d Deps) (_ *Access, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if d.Registry == nil || d.Ranges == nil || d.Codec == nil || d.Store == nil || d.Cache == nil || d.Hub == nil ||
		d.Revisions == nil || d.Negotiate == nil || d.Logger == nil || d.Metrics == nil {
		return nil, errors.New("cannot make gateway access: every dependency is required")
	}
	a := &Access{cfg: cfg, d: d}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			a.cancel()
		}
	}()
	tokenAuths, audiences, err := a.newTokens()
	if err != nil {
		return nil, err
	}
	rh := cfg.RequestHeader
	if a.authn, err = authn.New(authn.Config{
		ClientCAFile: cfg.ClientCAFile, TokenAuthFile: cfg.TokenAuthFile, Anonymous: cfg.AnonymousAuth,
		Tokens: tokenAuths, APIAudiences: audiences,
		RequestHeader: authn.RequestHeaderConfig{
			ClientCAFile: rh.ClientCAFile, AllowedNames: rh.AllowedNames, UsernameHeaders: rh.UsernameHeaders,
			UIDHeaders: rh.UIDHeaders, GroupHeaders: rh.GroupHeaders, ExtraHeaderPrefixes: rh.ExtraHeaderPrefixes,
		},
		Logger: d.Logger.With("component", "authn"),
	}); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	a.rbac = authz.NewRBAC()
	ac := authz.Config{Modes: cfg.AuthorizationModes}
	if ac.Webhook, err = a.newAuthzWebhook(); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	if slices.Contains(cfg.AuthorizationModes, authz.ModeNode) {
		if a.node, err = node.New(node.Config{
			Registry: d.Registry, Ranges: d.Ranges, Cache: d.Cache, Hub: d.Hub, Revisions: d.Revisions,
			Codec: d.Codec, Logger: d.Logger.With("component", "node-authorizer"),
		}); err != nil {
			return nil, fmt.Errorf("cannot make gateway: %w", err)
		}
		ac.Node = a.node
	}
	a.selectors = ac.Webhook != nil || a.node != nil
	if a.authorizer, err = authz.New(ac, a.rbac); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	a.escalation = authz.NewEscalation(a.authorizer, a.rbac)
	if a.rbacMode() {
		if a.feed, err = rbacfeed.New(rbacfeed.Config{
			Registry: d.Registry, Ranges: d.Ranges, Cache: d.Cache, Hub: d.Hub, Revisions: d.Revisions,
			Codec: d.Codec, RBAC: a.rbac, Logger: d.Logger.With("component", "rbacfeed"),
		}); err != nil {
			return nil, fmt.Errorf("cannot make gateway: %w", err)
		}
	}
	rc := review.Config{
		Codec: d.Negotiate, Authorizer: a.authorizer, Rules: ruleResolver{modes: cfg.AuthorizationModes, rbac: a.rbac, node: a.node}, Tokens: a.authn,
		APIAudiences: audiences, Objects: objectGetter{reg: d.Registry, store: d.Store},
	}
	if a.tokens != nil && a.tokens.CanIssue() {
		rc.Issuer = a.tokens
	}
	if a.review, err = review.New(a.ctx, rc); err != nil {
		return nil, fmt.Errorf("cannot make gateway: %w", err)
	}
	return a, nil
}

// newTokens builds the bearer-token authenticators beyond the token
// file: service-account tokens, then OIDC; and the API audiences.
func (a *Access) newTokens() ([]authenticator.Token, []string, error) {
	cfg, d := &a.cfg, &a.d
	var tokenAuths []authenticator.Token
	var audiences []string
	if len(cfg.ServiceAccountKeyFiles) > 0 || cfg.ServiceAccountSigningKeyFile != "" {
		keys, err := satoken.LoadPublicKeys(cfg.ServiceAccountKeyFiles...)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot make gateway: %w", err)
		}
		var signer crypto.Signer
		if cfg.ServiceAccountSigningKeyFile != "" {
			if signer, err = satoken.LoadSigningKey(cfg.ServiceAccountSigningKeyFile); err != nil {
				return nil, nil, fmt.Errorf("cannot make gateway: %w", err)
			}
		}
		lookup := objectLookup{reg: d.Registry, ranges: d.Ranges, cache: d.Cache, revisions: d.Revisions}
		if a.tokens, err = satoken.New(satoken.Config{
			Issuers: cfg.ServiceAccountIssuers, Audiences: cfg.APIAudiences, Keys: keys, SigningKey: signer,
			Lookup: lookup,
		}); err != nil {
			return nil, nil, fmt.Errorf("cannot make gateway: %w", err)
		}
		audiences = a.tokens.Audiences()
		// Legacy tokens first, as kube-apiserver orders them.
		if signer != nil {
			keys = append(keys, signer.Public())
		}
		legacy, err := newLegacyTokens(keys, audiences, lookup, d.Store)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot make gateway: %w", err)
		}
		tokenAuths = append(tokenAuths, legacy, a.tokens)
	}
	if o := cfg.OIDC; o.IssuerURL != "" {
		// After the service-account tokens, as in kube-apiserver; a token
		// of another issuer is not the OIDC authenticator's.
		tok, err := oidc.New(a.ctx, oidc.Config{
			IssuerURL: o.IssuerURL, ClientID: o.ClientID, UsernameClaim: o.UsernameClaim, UsernamePrefix: o.UsernamePrefix,
			GroupsClaim: o.GroupsClaim, GroupsPrefix: o.GroupsPrefix, RequiredClaims: o.RequiredClaims,
			SigningAlgs: o.SigningAlgs, JWKSFile: o.JWKSFile, DisallowedIssuers: cfg.ServiceAccountIssuers,
			Logger: d.Logger.With("component", "oidc"),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("cannot make gateway: %w", err)
		}
		if len(audiences) > 0 {
			tokenAuths = append(tokenAuths, authenticator.WrapAudienceAgnosticToken(audiences, tok))
		} else {
			tokenAuths = append(tokenAuths, tok)
		}
	}
	return tokenAuths, audiences, nil
}

// newAuthzWebhook builds mode Webhook's authorizer when it is one of the
// modes; nil otherwise. Webhook options without the mode are an error,
// as a config file given with a typo in --authorization-mode would
// otherwise be ignored.
func (a *Access) newAuthzWebhook() (authz.Authorizer, error) {
	wc := a.cfg.AuthorizationWebhook
	if !slices.Contains(a.cfg.AuthorizationModes, authz.ModeWebhook) {
		if wc != (AuthorizationWebhookConfig{}) {
			return nil, errors.New("authorization webhook options need Webhook in the authorization modes")
		}
		return nil, nil
	}
	if wc.ConfigFile == "" {
		return nil, errors.New("authorization mode Webhook needs an authorization webhook config file")
	}
	m, err := webhook.NewMetrics(a.d.Metrics)
	if err != nil {
		return nil, err
	}
	w, err := webhook.New(a.ctx, webhook.Config{
		ConfigFile: wc.ConfigFile, Version: wc.Version,
		AuthorizedTTL: wc.CacheAuthorizedTTL, UnauthorizedTTL: wc.CacheUnauthorizedTTL, Timeout: wc.Timeout,
		Logger: a.d.Logger.With("component", "authz-webhook"), Metrics: m,
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// rbacMode reports whether RBAC is one of the authorization modes (the
// default).
func (a *Access) rbacMode() bool {
	return len(a.cfg.AuthorizationModes) == 0 || slices.Contains(a.cfg.AuthorizationModes, authz.ModeRBAC)
}

// Start starts the RBAC feed, the Node authorizer's feed and, when
// configured, the ClusterRole aggregation (after bootstrap: the default
// roles are there).
func (a *Access) Start() {
	if a.node != nil {
		a.node.Start()
	}
	if a.feed != nil {
		a.feed.Start()
		if a.cfg.AggregateClusterRoles {
			a.aggregator = loop.Start(aggregationInterval, aggregator{rbac: a.rbac, feed: a.feed, reg: a.d.Registry, store: a.d.Store, log: a.d.Logger}.round)
		}
	}
}

// Close stops the aggregation and the feeds, and ends what waits on
// access (OIDC key reloads, webhook calls, reviews).
func (a *Access) Close() {
	a.cancel()
	a.aggregator.Stop()
	if a.feed != nil {
		a.feed.Close()
	}
	if a.node != nil {
		a.node.Close()
	}
}

// Authenticate names the user of a request (authn.ErrUnauthorized when
// its credentials are not valid).
func (a *Access) Authenticate(rc *fasthttp.RequestCtx) (user.Info, error) {
	return a.authn.Authenticate(rc)
}

// Authorizer is the authorizer chain (admission's CEL checks ask it).
func (a *Access) Authorizer() authz.Authorizer { return a.authorizer }

// Escalation checks RBAC writes against what their author holds.
func (a *Access) Escalation() *authz.Escalation { return a.escalation }

// Ready is the /readyz check "rbac": every role and binding listed.
func (a *Access) Ready(ctx context.Context) error {
	if a.feed == nil {
		return nil
	}
	return a.feed.Ready(ctx)
}

// NodeReady is the /readyz check "node-authorizer": the Node authorizer's
// graph holds every pod, volume and attachment (nil without mode Node).
func (a *Access) NodeReady(ctx context.Context) error {
	if a.node == nil {
		return nil
	}
	return a.node.Ready(ctx)
}

// EnsureServiceAccountSigningKey writes a new service-account signing key
// (RSA, PEM, mode 0600) to file unless the file exists, and checks that
// it loads. kgate dev keeps one in its data directory.
func EnsureServiceAccountSigningKey(file string) error {
	_, err := satoken.EnsureSigningKey(file)
	return err
}

// lookupTimeout bounds a TokenRequest's read of the object it names.
const lookupTimeout = 30 * time.Second
