// Package oidc authenticates OpenID Connect ID tokens of one issuer, as
// kube-apiserver's --oidc-* flags do, with k8s.io/apiserver's own JWT
// authenticator. kgate does not fetch the issuer's discovery document: the
// issuer's public keys come from a JWKS file (Config.JWKSFile), re-read
// when it changes so that keys can be rotated without a restart. As in
// kube-apiserver, answers are cached per token (10 s for a token that
// authenticated, 1 s otherwise; never past the token's expiry).
package oidc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"time"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	apiserveroidc "k8s.io/apiserver/plugin/pkg/authenticator/token/oidc"
)

// ErrInvalidConfig: Config is missing a field or has a bad value.
var ErrInvalidConfig = errors.New("oidc: invalid config")

// Defaults of Config.
const (
	DefaultUsernameClaim  = "sub"
	DefaultSigningAlg     = "RS256"
	DefaultReloadInterval = 10 * time.Second
)

// Config are kube-apiserver's legacy --oidc-* options, plus the JWKS file.
type Config struct {
	// IssuerURL (--oidc-issuer-url) must be https and equal the tokens'
	// iss claim; tokens of other issuers are not this authenticator's.
	IssuerURL string
	// ClientID (--oidc-client-id) must be one of the tokens' audiences.
	ClientID string
	// UsernameClaim (--oidc-username-claim) is the claim naming the user.
	// Default "sub".
	UsernameClaim string
	// UsernamePrefix (--oidc-username-prefix) is put before the username.
	// Empty: IssuerURL + "#", except for the claim "email"; "-": none.
	UsernamePrefix string
	// GroupsClaim (--oidc-groups-claim) is a string or string-array claim
	// with the user's groups, each prefixed by GroupsPrefix
	// (--oidc-groups-prefix). Optional.
	GroupsClaim, GroupsPrefix string
	// RequiredClaims (--oidc-required-claim) are claims a token must have,
	// with exactly these string values.
	RequiredClaims map[string]string
	// SigningAlgs (--oidc-signing-algs) are the accepted signature
	// algorithms. Default RS256.
	SigningAlgs []string
	// JWKSFile is the issuer's JSON Web Key Set (the document its
	// jwks_uri serves). Required. It is re-read at most every
	// ReloadInterval (default 10s), and at most every second while tokens
	// signed with an unknown key arrive. A token verified with a key
	// since removed works until its cache entry ends (10 s at most).
	JWKSFile       string
	ReloadInterval time.Duration
	// DisallowedIssuers may not be IssuerURL: the service-account issuers,
	// whose tokens are verified elsewhere.
	DisallowedIssuers []string
	// Logger receives JWKS reloads and failures. Default: discard.
	Logger *slog.Logger
}

// Authenticator verifies ID tokens; it is an authenticator.Token that
// answers (nil, false, nil) for tokens of another issuer.
type Authenticator struct {
	token *cachedToken
	keys  *keySet
}

// AuthenticateToken implements authenticator.Token.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return a.token.AuthenticateToken(ctx, token)
}

// New checks cfg, reads the JWKS file and builds the authenticator. ctx
// bounds the authenticator's life (it is used to fetch distributed
// claims): cancel it only once the authenticator is no longer used.
func New(ctx context.Context, cfg Config) (*Authenticator, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	keys, err := newKeySet(cfg.JWKSFile, cfg.SigningAlgs, cfg.ReloadInterval, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	token, err := apiserveroidc.New(ctx, apiserveroidc.Options{
		JWTAuthenticator:     cfg.jwtAuthenticator(),
		KeySet:               keys,
		SupportedSigningAlgs: cfg.SigningAlgs,
		DisallowedIssuers:    cfg.DisallowedIssuers,
		// Only for distributed claims: the keys come from the file.
		Client: &http.Client{Timeout: 30 * time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Authenticator{token: newCachedToken(token), keys: keys}, nil
}

// defaults checks cfg and fills its defaults.
func (cfg *Config) defaults() error {
	if cfg.IssuerURL == "" {
		return fmt.Errorf("%w: the issuer URL is required", ErrInvalidConfig)
	}
	u, err := url.Parse(cfg.IssuerURL)
	if err != nil {
		return fmt.Errorf("%w: issuer URL: %w", ErrInvalidConfig, err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%w: the issuer URL %q must be an https URL", ErrInvalidConfig, cfg.IssuerURL)
	}
	if cfg.ClientID == "" {
		return fmt.Errorf("%w: the client ID is required with an issuer URL", ErrInvalidConfig)
	}
	if cfg.JWKSFile == "" {
		return fmt.Errorf("%w: a JWKS file is required with an issuer URL (kgate does not fetch the issuer's keys)", ErrInvalidConfig)
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = DefaultUsernameClaim
	}
	if len(cfg.SigningAlgs) == 0 {
		cfg.SigningAlgs = []string{DefaultSigningAlg}
	}
	valid := apiserveroidc.AllValidSigningAlgorithms()
	for _, a := range cfg.SigningAlgs {
		if !slices.Contains(valid, a) {
			return fmt.Errorf("%w: signing algorithm %q is not one of %v", ErrInvalidConfig, a, valid)
		}
	}
	for k := range cfg.RequiredClaims {
		if k == "" {
			return fmt.Errorf("%w: a required claim has no name", ErrInvalidConfig)
		}
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// jwtAuthenticator maps the legacy flags to apiserver's JWTAuthenticator
// as kube-apiserver does (pkg/kubeapiserver/options/authentication.go).
func (cfg *Config) jwtAuthenticator() apiserver.JWTAuthenticator {
	prefix := cfg.UsernamePrefix
	if prefix == "" && cfg.UsernameClaim != "email" {
		// Without a prefix, every claim but email is prefixed with the
		// issuer, so that it cannot collide with other users
		// (kubernetes/kubernetes#31380).
		prefix = cfg.IssuerURL + "#"
	}
	if prefix == "-" {
		prefix = ""
	}
	j := apiserver.JWTAuthenticator{
		Issuer: apiserver.Issuer{URL: cfg.IssuerURL, Audiences: []string{cfg.ClientID}},
		ClaimMappings: apiserver.ClaimMappings{
			Username: apiserver.PrefixedClaimOrExpression{Claim: cfg.UsernameClaim, Prefix: &prefix},
		},
	}
	if cfg.GroupsClaim != "" {
		groupsPrefix := cfg.GroupsPrefix
		j.ClaimMappings.Groups = apiserver.PrefixedClaimOrExpression{Claim: cfg.GroupsClaim, Prefix: &groupsPrefix}
	}
	claims := make([]string, 0, len(cfg.RequiredClaims))
	for k := range cfg.RequiredClaims {
		claims = append(claims, k)
	}
	sort.Strings(claims)
	for _, k := range claims {
		j.ClaimValidationRules = append(j.ClaimValidationRules, apiserver.ClaimValidationRule{Claim: k, RequiredValue: cfg.RequiredClaims[k]})
	}
	return j
}

// AllSigningAlgs are the signature algorithms SigningAlgs may name.
func AllSigningAlgs() []string { return apiserveroidc.AllValidSigningAlgorithms() }
