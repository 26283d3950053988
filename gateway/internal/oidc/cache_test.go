package oidc

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// TestCachedToken: a cached token yields its own user, and stops working
// when it expires though the cache would keep it longer.
func TestCachedToken(t *testing.T) {
	k := testKeys()
	a := newAuth(t, Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: writeJWKS(t, "", k.rsa), GroupsClaim: "groups", UsernamePrefix: "-"})
	now := time.Now()
	a.token.now = func() time.Time { return now }
	ctx := context.Background()
	auth := func(token string) (*authenticator.Response, error) {
		t.Helper()
		resp, ok, err := a.AuthenticateToken(ctx, token)
		if err == nil && !ok {
			err = errors.New("not authenticated")
		}
		return resp, err
	}
	check := func(step string, resp *authenticator.Response, err error, name string, groups ...string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if u := resp.User; u.GetName() != name || !slices.Equal(u.GetGroups(), groups) {
			t.Errorf("%s: user %q %v; want %q %v", step, u.GetName(), u.GetGroups(), name, groups)
		}
	}
	// exp is whole seconds: a token expiring in 2 s, at the latest.
	exp := now.Add(2 * time.Second).Truncate(time.Second)
	jane := sign(t, k.rsa, jose.RS256, kid(0), claims("exp", exp.Unix()))
	bob := sign(t, k.rsa, jose.RS256, kid(0), claims("sub", "bob", "groups", []string{"ops"}))

	first, err := auth(jane)
	check("jane", first, err, "1234", "dev", "ops")
	again, err := auth(jane)
	check("jane again", again, err, "1234", "dev", "ops")
	if again.User != first.User {
		t.Error("the second request was not answered from the cache")
	}
	if again == first {
		t.Error("two requests share a response")
	}
	resp, err := auth(bob)
	check("bob after jane", resp, err, "bob", "ops")

	// Still in the cache, but expired: rejected the moment the JWT
	// authenticator would reject it (exp before now).
	now = exp
	resp, err = auth(jane)
	check("jane at her expiry", resp, err, "1234", "dev", "ops")
	now = exp.Add(time.Millisecond)
	if _, err := auth(jane); !errors.Is(err, errExpired) {
		t.Errorf("jane after her expiry: %v, want %v", err, errExpired)
	}
	resp, err = auth(bob)
	check("bob, not expired", resp, err, "bob", "ops")
}

// TestCachedTokenExpires: the same with the default clock, by waiting
// (in a synctest bubble) for a token to expire.
func TestCachedTokenExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := testKeys()
		a := newAuth(t, Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: writeJWKS(t, "", k.rsa)})
		exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
		token := sign(t, k.rsa, jose.RS256, kid(0), claims("exp", exp.Unix()))
		if _, ok, err := a.AuthenticateToken(context.Background(), token); !ok || err != nil {
			t.Fatalf("fresh token: %v %v", ok, err)
		}
		time.Sleep(time.Until(exp) + 50*time.Millisecond)
		if _, ok, err := a.AuthenticateToken(context.Background(), token); ok || err == nil {
			t.Fatalf("expired token: %v %v", ok, err)
		}
	})
}

func TestExpiry(t *testing.T) {
	f := func(name, token string, want int64, wantErr string) {
		t.Run(name, func(t *testing.T) {
			got, err := expiry(token)
			if wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, wantErr)
				}
				return
			}
			if err != nil || got.Unix() != want {
				t.Fatalf("got %v, %v; want %d", got, err, want)
			}
		})
	}
	jwt := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	f("integer", jwt(`{"exp":1700000000}`), 1700000000, "")
	f("fraction", jwt(`{"exp":1700000000.9}`), 1700000000, "")
	f("exponent", jwt(`{"exp":1.7e9}`), 1700000000, "")
	f("quoted number", jwt(`{"exp":"1700000000"}`), 1700000000, "")
	f("padded payload", "eyJhbGciOiJSUzI1NiJ9."+base64.URLEncoding.EncodeToString([]byte(`{"exp":1}`))+".c2ln", 1, "")
	f("no exp", jwt(`{"sub":"x"}`), 0, "no valid expiry")
	f("exp not a number", jwt(`{"exp":"soon"}`), 0, "malformed jwt claims")
	f("exp null", jwt(`{"exp":null}`), 0, "no valid expiry")
	f("payload not JSON", jwt(`nope`), 0, "malformed jwt claims")
	f("payload not base64", "a.b!c.d", 0, "malformed jwt payload")
	f("two parts", "a.b", 0, "malformed jwt")
	f("four parts", jwt(`{"exp":1}`)+".x", 0, "malformed jwt")
}

// TestCachedTokenAudiences: behind the audience-agnostic wrapper (the
// gateway's wiring with service accounts), which sets the audiences of
// the response it gets, a cached token authenticates again, and a
// request without audiences gets none.
func TestCachedTokenAudiences(t *testing.T) {
	k := testKeys()
	a := newAuth(t, Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: writeJWKS(t, "", k.rsa)})
	wrapped := authenticator.WrapAudienceAgnosticToken(authenticator.Audiences{"api"}, a)
	token := sign(t, k.rsa, jose.RS256, kid(0), claims())
	review := authenticator.WithAudiences(context.Background(), authenticator.Audiences{"api", "other"})
	for i := range 3 {
		resp, ok, err := wrapped.AuthenticateToken(review, token)
		if !ok || err != nil || !slices.Equal(resp.Audiences, []string{"api"}) {
			t.Fatalf("review %d: %v %v %v", i, resp, ok, err)
		}
	}
	resp, ok, err := wrapped.AuthenticateToken(context.Background(), token)
	if !ok || err != nil || len(resp.Audiences) != 0 {
		t.Fatalf("request: %v %v %v", resp, ok, err)
	}
}
