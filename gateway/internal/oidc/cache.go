package oidc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
)

// How long the token cache keeps an answer: kube-apiserver's 10 s for a
// token that authenticated; briefly for one that did not (or was not
// this issuer's), so that a client retrying a bad token does not pay a
// signature verification each time, yet a token signed with a key just
// added to the JWKS file works a second later.
const (
	cacheSuccessTTL = 10 * time.Second
	cacheFailureTTL = time.Second
)

// errExpired: a cached token has expired since it was verified.
var errExpired = errors.New("oidc: token is expired")

// cachedToken is the JWT authenticator behind k8s.io/apiserver's token
// cache, which kube-apiserver puts in front of its token authenticators:
// answers are kept per token (and audiences), so a client's requests do
// not each verify a signature. The cache keeps a success for its TTL
// whatever the token's expiry, so cachedToken remembers the expiry with
// the user and rejects the token once it has passed, as the JWT
// authenticator would (exp before now).
type cachedToken struct {
	cache  authenticator.Token // in front of verify, through expiring
	verify authenticator.Token // the JWT authenticator
	now    func() time.Time
}

func newCachedToken(verify authenticator.Token) *cachedToken {
	return &cachedToken{
		cache:  tokencache.New(expiring{verify}, true, cacheSuccessTTL, cacheFailureTTL),
		verify: verify,
		now:    time.Now,
	}
}

// AuthenticateToken implements authenticator.Token. The response is the
// caller's to modify (the audience-agnostic wrapper sets its Audiences);
// the cache's is shared.
func (c *cachedToken) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	resp, ok, err := c.cache.AuthenticateToken(ctx, token)
	if !ok || err != nil {
		return nil, false, err
	}
	u, ok := resp.User.(*expiringUser)
	if !ok {
		return nil, false, errors.New("oidc: cached token without an expiry")
	}
	if u.exp.Before(c.now()) {
		return nil, false, fmt.Errorf("%w (token expiry: %v)", errExpired, u.exp)
	}
	return &authenticator.Response{User: u.Info, Audiences: resp.Audiences}, true, nil
}

// expiring is the JWT authenticator as the cache sees it: the user of a
// token that authenticated comes with the token's expiry.
type expiring struct{ verify authenticator.Token }

func (e expiring) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	resp, ok, err := e.verify.AuthenticateToken(ctx, token)
	if !ok || err != nil {
		return resp, ok, err
	}
	// The token is the very string verified: its claims are the ones
	// the signature covers.
	exp, err := expiry(token)
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: &expiringUser{Info: resp.User, exp: exp}, Audiences: resp.Audiences}, true, nil
}

// expiringUser is a verified token's user and expiry, as the cache keeps
// them; it never leaves cachedToken.
type expiringUser struct {
	user.Info
	exp time.Time
}

// expiry is the exp claim of a compact JWS, read as go-jose (the payload)
// and go-oidc (the claim) read it for verification.
func expiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("oidc: malformed jwt")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, fmt.Errorf("oidc: malformed jwt payload: %w", err)
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, fmt.Errorf("oidc: malformed jwt claims: %w", err)
	}
	unix, err := claims.Exp.Int64()
	if err != nil {
		f, ferr := claims.Exp.Float64()
		if ferr != nil {
			return time.Time{}, fmt.Errorf("oidc: token has no valid expiry: %w", err)
		}
		unix = int64(f)
	}
	return time.Unix(unix, 0), nil
}
