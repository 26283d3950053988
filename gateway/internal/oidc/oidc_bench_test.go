package oidc

import (
	"context"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// BenchmarkAuthenticateToken measures a valid RS256 ID token presented
// again and again, as a client's requests do.
func BenchmarkAuthenticateToken(b *testing.B) {
	k := testKeys()
	a := newAuth(b, Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: writeJWKS(b, "", k.rsa), GroupsClaim: "groups"})
	token := sign(b, k.rsa, jose.RS256, kid(0), claims())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := a.AuthenticateToken(ctx, token); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
