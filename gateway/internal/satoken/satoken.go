// Package satoken issues and verifies service-account tokens the way
// kube-apiserver does: JWTs signed with the --service-account-signing-key-file
// key, bound to an audience, an expiry and optionally a Pod, Secret or
// Node, carrying the "kubernetes.io" private claims. Verification checks
// the signature against the --service-account-key-file keys, the issuer,
// the audience and the expiry, and that the service account (and any bound
// object) still exists with the uid in the token.
package satoken

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// Errors.
var (
	// ErrInvalidConfig: Config is missing a field or has a bad value.
	ErrInvalidConfig = errors.New("satoken: invalid config")
	// ErrNoSigningKey: Issue was called without a signing key configured.
	ErrNoSigningKey = errors.New("satoken: no signing key")
	// ErrNotFound is what a Lookup returns (wrapped) for an object that
	// does not exist.
	ErrNotFound = errors.New("satoken: not found")
)

// Object is what verification needs of a service account or of the
// object a token is bound to.
type Object struct {
	UID string
	// DeletionTimestamp is set once deletion started.
	DeletionTimestamp *time.Time
}

// Lookup reads the objects tokens refer to. Resource is "serviceaccounts",
// "pods", "secrets" or "nodes"; namespace is empty for nodes. A missing
// object is an error wrapping ErrNotFound.
type Lookup interface {
	Object(ctx context.Context, resource, namespace, name string) (Object, error)
}

// Config configures Tokens.
type Config struct {
	// Issuers are the accepted "iss" values (--service-account-issuer);
	// the first is written into issued tokens. Required.
	Issuers []string
	// Audiences are the audiences a token must have one of to
	// authenticate to the API (--api-audiences). Default: Issuers.
	Audiences []string
	// Keys verify signatures. The public half of SigningKey is added.
	Keys []crypto.PublicKey
	// SigningKey signs issued tokens; nil disables Issue.
	SigningKey crypto.Signer
	// Lookup checks that service accounts and bound objects still exist;
	// required for verification.
	Lookup Lookup
	// LookupTimeout bounds the lookups of one verification. Default 5s.
	LookupTimeout time.Duration
	// Now returns the time. Default time.Now.
	Now func() time.Time
}

// Tokens issues and verifies service-account tokens. It is safe for
// concurrent use.
type Tokens struct {
	cfg    Config
	signer jose.Signer // nil without a signing key
}

// New validates cfg and prepares the signer.
func New(cfg Config) (*Tokens, error) {
	if len(cfg.Issuers) == 0 || cfg.Issuers[0] == "" {
		return nil, fmt.Errorf("%w: an issuer is required", ErrInvalidConfig)
	}
	if cfg.Lookup == nil {
		return nil, fmt.Errorf("%w: Lookup is required", ErrInvalidConfig)
	}
	if len(cfg.Audiences) == 0 {
		cfg.Audiences = cfg.Issuers
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Keys = append([]crypto.PublicKey(nil), cfg.Keys...)
	t := &Tokens{}
	if cfg.SigningKey != nil {
		pub := cfg.SigningKey.Public()
		alg, err := algorithmFor(pub)
		if err != nil {
			return nil, fmt.Errorf("%w: signing key: %w", ErrInvalidConfig, err)
		}
		kid, err := keyID(pub)
		if err != nil {
			return nil, fmt.Errorf("%w: signing key: %w", ErrInvalidConfig, err)
		}
		t.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: cfg.SigningKey, KeyID: kid}},
			(&jose.SignerOptions{}).WithType("JWT"))
		if err != nil {
			return nil, fmt.Errorf("%w: signing key: %w", ErrInvalidConfig, err)
		}
		cfg.Keys = append(cfg.Keys, pub)
	}
	if len(cfg.Keys) == 0 {
		return nil, fmt.Errorf("%w: no key to verify tokens with", ErrInvalidConfig)
	}
	for _, k := range cfg.Keys {
		if _, err := algorithmFor(k); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	t.cfg = cfg
	return t, nil
}

// CanIssue reports whether a signing key is configured.
func (t *Tokens) CanIssue() bool { return t.signer != nil }

// Audiences are the API's audiences: what a token request without
// audiences gets.
func (t *Tokens) Audiences() []string { return append([]string(nil), t.cfg.Audiences...) }

// Ref names an object a token refers to.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// privateClaims are kube-apiserver's "kubernetes.io" claims.
type privateClaims struct {
	Kubernetes kubernetesClaims `json:"kubernetes.io,omitempty"`
}

type kubernetesClaims struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount Ref              `json:"serviceaccount,omitempty"`
	Pod            *Ref             `json:"pod,omitempty"`
	Secret         *Ref             `json:"secret,omitempty"`
	Node           *Ref             `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

// Request is a token to issue.
type Request struct {
	Namespace      string
	ServiceAccount Ref
	Audiences      []string
	// Expiration is the token's lifetime.
	Expiration time.Duration
	// Pod, Secret and Node bind the token to an object (at most one of
	// Pod and Secret; Node alone or with Pod, the pod's node).
	Pod, Secret, Node *Ref
	// ID is the token's "jti".
	ID string
}

// Issued is a signed token.
type Issued struct {
	Token     string
	ExpiresAt time.Time
}

// Issue signs a token for req.
func (t *Tokens) Issue(req Request) (Issued, error) {
	if t.signer == nil {
		return Issued{}, ErrNoSigningKey
	}
	now := t.cfg.Now()
	exp := now.Add(req.Expiration)
	public := jwt.Claims{
		Issuer:    t.cfg.Issuers[0],
		Subject:   serviceaccount.MakeUsername(req.Namespace, req.ServiceAccount.Name),
		Audience:  jwt.Audience(req.Audiences),
		Expiry:    jwt.NewNumericDate(exp),
		NotBefore: jwt.NewNumericDate(now),
		IssuedAt:  jwt.NewNumericDate(now),
		ID:        req.ID,
	}
	private := privateClaims{Kubernetes: kubernetesClaims{
		Namespace: req.Namespace, ServiceAccount: req.ServiceAccount,
		Pod: req.Pod, Secret: req.Secret, Node: req.Node,
	}}
	token, err := jwt.Signed(t.signer).Claims(public).Claims(private).Serialize()
	if err != nil {
		return Issued{}, fmt.Errorf("cannot sign token: %w", err)
	}
	// The JWT's dates have second precision: report what the token says.
	return Issued{Token: token, ExpiresAt: public.Expiry.Time()}, nil
}
