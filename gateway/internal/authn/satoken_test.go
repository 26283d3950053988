package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/kgate/kgate/gateway/internal/satoken"
)

// accounts is the service accounts that exist, for satoken.
type accounts struct {
	mu   sync.Mutex
	uids map[string]string // namespace/name → uid
}

func (a *accounts) Object(_ context.Context, resource, ns, name string) (satoken.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	uid, ok := a.uids[ns+"/"+name]
	if resource != "serviceaccounts" || !ok {
		return satoken.Object{}, fmt.Errorf("%s %s/%s: %w", resource, ns, name, satoken.ErrNotFound)
	}
	return satoken.Object{UID: uid}, nil
}

// TestServiceAccountTokens: service-account JWTs next to the other
// methods, good and bad, over TLS: bad ones are 401 (never a 500 or a
// panic), and other methods keep working.
func TestServiceAccountTokens(t *testing.T) {
	fx := newFixture(t)
	sa := &accounts{uids: map[string]string{"ns/builder": "uid-builder"}}
	iss := "https://kgate.test"
	newTokens := func() *satoken.Tokens {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tokens, err := satoken.New(satoken.Config{Issuers: []string{iss}, SigningKey: key, Lookup: sa})
		if err != nil {
			t.Fatal(err)
		}
		return tokens
	}
	tokens, other := newTokens(), newTokens()
	var err error
	if fx.strict, err = New(Config{ClientCAFile: fx.caFile, TokenAuthFile: fx.tokenFile, Tokens: []authenticator.Token{tokens}}); err != nil {
		t.Fatal(err)
	}
	if fx.anon, err = New(Config{Tokens: []authenticator.Token{tokens}, Anonymous: true}); err != nil {
		t.Fatal(err)
	}
	addr := fx.serve(t, tls.RequestClientCert, nil)
	issue := func(tk *satoken.Tokens, exp time.Duration) string {
		out, err := tk.Issue(satoken.Request{Namespace: "ns", ServiceAccount: satoken.Ref{Name: "builder", UID: "uid-builder"},
			Audiences: []string{iss}, Expiration: exp})
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + out.Token
	}
	good, expired, wrongSig := issue(tokens, time.Hour), issue(tokens, -2*time.Minute), issue(other, time.Hour)
	builder := result{Status: 200, Name: "system:serviceaccount:ns:builder", UID: "uid-builder",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}}
	denied := result{Status: 401}
	f := func(name, path, authz string, want result) {
		t.Run(name, func(t *testing.T) {
			got := fx.call(t, addr, path, nil, authz)
			if got.Status != want.Status || got.Name != want.Name || got.UID != want.UID || !slices.Equal(got.Groups, want.Groups) || got.AuthHeader {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	f("good", "/", good, builder)
	f("expired", "/", expired, denied)
	f("wrong signature", "/", wrongSig, denied)
	f("missing", "/", "", denied)
	f("truncated", "/", good[:len(good)-10], denied)
	f("static token still works", "/", "Bearer tok-alice", result{Status: 200, Name: "alice", UID: "uid-alice", Groups: []string{"dev", "ops", "system:authenticated"}})
	f("anon good", "/anon", good, builder)
	f("anon expired", "/anon", expired, denied)
	f("anon wrong signature", "/anon", wrongSig, denied)
	sa.mu.Lock()
	delete(sa.uids, "ns/builder")
	sa.mu.Unlock()
	f("service account deleted", "/", good, denied)
}
