package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/utils/ptr"
)

const issuer = "https://issuer.example.com"

// keys are the test's signing keys.
type keys struct {
	rsa, other *rsa.PrivateKey
	ec         *ecdsa.PrivateKey
}

// testKeys are generated once: RSA key generation is slow under -race.
var testKeys = sync.OnceValue(func() keys {
	var k keys
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.other, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	return k
})

// writeJWKS writes the public halves of keys (kid = index) as a JWKS
// file, to path or a new file.
func writeJWKS(t testing.TB, path string, keys ...crypto.Signer) string {
	t.Helper()
	var set jose.JSONWebKeySet
	for i, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid(i), Use: "sig"})
	}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if path == "" {
		path = filepath.Join(t.TempDir(), "jwks.json")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func kid(i int) string { return "key-" + string(rune('a'+i)) }

// sign makes a compact JWS of claims with key, alg and key ID.
func sign(t testing.TB, key crypto.Signer, alg jose.SignatureAlgorithm, keyID string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: keyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claims are valid claims for issuer and audience "kgate", with edits.
func claims(edits ...any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": issuer, "aud": "kgate", "sub": "1234", "email": "jane@example.com",
		"groups": []string{"dev", "ops"}, "hd": "example.com",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	for i := 0; i+1 < len(edits); i += 2 {
		if edits[i+1] == nil {
			delete(c, edits[i].(string))
		} else {
			c[edits[i].(string)] = edits[i+1]
		}
	}
	return c
}

func newAuth(t testing.TB, cfg Config) *Authenticator {
	t.Helper()
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthenticateToken(t *testing.T) {
	k := testKeys()
	jwks := writeJWKS(t, "", k.rsa, k.ec)
	base := Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: jwks, GroupsClaim: "groups", GroupsPrefix: "oidc:"}
	plain := newAuth(t, base)
	email := base
	email.UsernameClaim, email.GroupsClaim = "email", ""
	byEmail := newAuth(t, email)
	noPrefix := base
	noPrefix.UsernamePrefix = "-"
	unprefixed := newAuth(t, noPrefix)
	custom := base
	custom.UsernamePrefix, custom.RequiredClaims = "corp:", map[string]string{"hd": "example.com"}
	required := newAuth(t, custom)
	ec := base
	ec.SigningAlgs = []string{"ES256", "RS256"}
	ecdsaToo := newAuth(t, ec)

	type want struct {
		ok     bool
		err    bool
		name   string
		groups []string
	}
	f := func(name string, a *Authenticator, token string, w want) {
		t.Run(name, func(t *testing.T) {
			resp, ok, err := a.AuthenticateToken(context.Background(), token)
			if ok != w.ok || (err != nil) != w.err {
				t.Fatalf("ok=%v err=%v; want ok=%v err=%v", ok, err, w.ok, w.err)
			}
			if !ok {
				return
			}
			if u := resp.User; u.GetName() != w.name || !slices.Equal(u.GetGroups(), w.groups) {
				t.Errorf("user %q %v; want %q %v", u.GetName(), u.GetGroups(), w.name, w.groups)
			}
		})
	}
	rs := func(c map[string]any) string { return sign(t, k.rsa, jose.RS256, kid(0), c) }
	good := rs(claims())
	f("good", plain, good, want{ok: true, name: issuer + "#1234", groups: []string{"oidc:dev", "oidc:ops"}})
	f("no key ID", plain, sign(t, k.rsa, jose.RS256, "", claims()), want{ok: true, name: issuer + "#1234", groups: []string{"oidc:dev", "oidc:ops"}})
	f("groups as a string", plain, rs(claims("groups", "admins")), want{ok: true, name: issuer + "#1234", groups: []string{"oidc:admins"}})
	f("no groups claim", plain, rs(claims("groups", nil)), want{ok: true, name: issuer + "#1234"})
	f("email, not prefixed", byEmail, good, want{ok: true, name: "jane@example.com"})
	f("email verified", byEmail, rs(claims("email_verified", true)), want{ok: true, name: "jane@example.com"})
	f("email not verified", byEmail, rs(claims("email_verified", false)), want{err: true})
	f("no username claim", byEmail, rs(claims("email", nil)), want{err: true})
	f("prefix -", unprefixed, good, want{ok: true, name: "1234", groups: []string{"oidc:dev", "oidc:ops"}})
	f("custom prefix and required claim", required, good, want{ok: true, name: "corp:1234", groups: []string{"oidc:dev", "oidc:ops"}})
	f("required claim missing", required, rs(claims("hd", nil)), want{err: true})
	f("required claim differs", required, rs(claims("hd", "evil.com")), want{err: true})
	f("required claim not a string", required, rs(claims("hd", 3)), want{err: true})
	f("expired", plain, rs(claims("exp", time.Now().Add(-time.Minute).Unix())), want{err: true})
	f("no expiry", plain, rs(claims("exp", nil)), want{err: true})
	f("not yet valid", plain, rs(claims("nbf", time.Now().Add(time.Hour).Unix())), want{err: true})
	f("another key", plain, sign(t, k.other, jose.RS256, kid(0), claims()), want{err: true})
	f("another key without ID", plain, sign(t, k.other, jose.RS256, "", claims()), want{err: true})
	f("wrong key ID", plain, sign(t, k.rsa, jose.RS256, "key-z", claims()), want{err: true})
	f("another issuer", plain, rs(claims("iss", "https://other.example.com")), want{})
	f("no issuer", plain, rs(claims("iss", nil)), want{})
	f("another audience", plain, rs(claims("aud", "someone-else")), want{err: true})
	f("audience list", plain, rs(claims("aud", []string{"x", "kgate"})), want{ok: true, name: issuer + "#1234", groups: []string{"oidc:dev", "oidc:ops"}})
	f("ES256 not allowed", plain, sign(t, k.ec, jose.ES256, kid(1), claims()), want{err: true})
	f("ES256 allowed", ecdsaToo, sign(t, k.ec, jose.ES256, kid(1), claims()), want{ok: true, name: issuer + "#1234", groups: []string{"oidc:dev", "oidc:ops"}})
	f("RS256 with ES256 allowed too", ecdsaToo, good, want{ok: true, name: issuer + "#1234", groups: []string{"oidc:dev", "oidc:ops"}})
	f("PS256 not allowed", ecdsaToo, sign(t, k.rsa, jose.PS256, kid(0), claims()), want{err: true})
	// Tampering: claims changed after signing.
	parts := strings.Split(good, ".")
	other := strings.Split(rs(claims("sub", "admin")), ".")
	f("payload swapped", plain, parts[0]+"."+other[1]+"."+parts[2], want{err: true})
	f("signature dropped", plain, parts[0]+"."+parts[1]+".", want{err: true})
	f("alg none", plain, "eyJhbGciOiJub25lIn0."+parts[1]+".", want{err: true})
	f("not a JWT", plain, "tok-alice", want{})
	f("empty", plain, "", want{})
}

func TestJWKSReload(t *testing.T) {
	k := testKeys()
	jwks := writeJWKS(t, "", k.rsa)
	a := newAuth(t, Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: jwks})
	now := time.Now()
	a.keys.now = func() time.Time { return now }
	// Past the token cache (its clock is the real one): the JWT
	// authenticator sees every token.
	auth := func(key *rsa.PrivateKey) error {
		_, ok, err := a.token.verify.AuthenticateToken(context.Background(), sign(t, key, jose.RS256, "", claims()))
		if err == nil && !ok {
			err = errors.New("not authenticated")
		}
		return err
	}
	if err := auth(k.rsa); err != nil {
		t.Fatal(err)
	}
	// The issuer adds a key and signs with it: a miss re-reads the file,
	// but not more than once a second.
	writeJWKS(t, jwks, k.rsa, k.other)
	if auth(k.other) == nil {
		t.Fatal("the new key was accepted without a reload, at the time of the last read")
	}
	now = now.Add(time.Second)
	if err := auth(k.other); err != nil {
		t.Fatalf("new key after a second: %v", err)
	}
	// The old key is removed: it stops working after the reload interval.
	writeJWKS(t, jwks, k.other)
	now = now.Add(DefaultReloadInterval - time.Millisecond)
	if err := auth(k.rsa); err != nil {
		t.Fatalf("old key within the interval: %v", err)
	}
	now = now.Add(time.Millisecond)
	if auth(k.rsa) == nil {
		t.Fatal("removed key still accepted after the reload interval")
	}
	// A broken file keeps the keys in use.
	if err := os.WriteFile(jwks, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if err := auth(k.other); err != nil {
		t.Fatalf("after a broken file: %v", err)
	}
	os.Remove(jwks)
	now = now.Add(time.Hour)
	if err := auth(k.other); err != nil {
		t.Fatalf("after the file was removed: %v", err)
	}
}

func TestNew(t *testing.T) {
	k := testKeys()
	jwks := writeJWKS(t, "", k.rsa)
	dir := t.TempDir()
	file := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: jwks}
	f := func(name string, edit func(*Config), wantErr string) {
		t.Run(name, func(t *testing.T) {
			cfg := good
			edit(&cfg)
			_, err := New(context.Background(), cfg)
			if wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("err = %v; want ErrInvalidConfig with %q", err, wantErr)
			}
		})
	}
	f("good", func(*Config) {}, "")
	f("all algorithms", func(c *Config) { c.SigningAlgs = AllSigningAlgs() }, "")
	f("no issuer", func(c *Config) { c.IssuerURL = "" }, "issuer URL is required")
	f("http issuer", func(c *Config) { c.IssuerURL = "http://issuer.example.com" }, "must be an https URL")
	f("issuer without host", func(c *Config) { c.IssuerURL = "https:///x" }, "must be an https URL")
	f("issuer with a fragment", func(c *Config) { c.IssuerURL = issuer + "#x" }, "fragment")
	f("no client ID", func(c *Config) { c.ClientID = "" }, "client ID is required")
	f("no JWKS file", func(c *Config) { c.JWKSFile = "" }, "JWKS file is required")
	f("missing JWKS file", func(c *Config) { c.JWKSFile = filepath.Join(dir, "missing") }, "cannot read JWKS file")
	f("JWKS not JSON", func(c *Config) { c.JWKSFile = file("bad.json", "nope") }, "not a JSON Web Key Set")
	f("JWKS empty", func(c *Config) { c.JWKSFile = file("empty.json", `{"keys":[]}`) }, "no signing key")
	f("JWKS symmetric key", func(c *Config) {
		c.JWKSFile = file("oct.json", `{"keys":[{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`)
	}, "not an asymmetric key")
	f("JWKS encryption key only", func(c *Config) {
		data, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.rsa.Public(), Use: "enc"}}})
		c.JWKSFile = file("enc.json", string(data))
	}, "no signing key")
	f("HS256", func(c *Config) { c.SigningAlgs = []string{"HS256"} }, `signing algorithm "HS256"`)
	f("alg none", func(c *Config) { c.SigningAlgs = []string{"none"} }, `signing algorithm "none"`)
	f("required claim without name", func(c *Config) { c.RequiredClaims = map[string]string{"": "x"} }, "required claim has no name")
	f("service-account issuer", func(c *Config) { c.DisallowedIssuers = []string{"https://kubernetes.default.svc", issuer} }, "issuer")

	// A private key in the file is used for its public half.
	priv, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.rsa, KeyID: "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := good
	cfg.JWKSFile = file("private.json", string(priv))
	a := newAuth(t, cfg)
	if keys := *a.keys.keys.Load(); len(keys) != 1 || !keys[0].IsPublic() {
		t.Errorf("keys %+v, want the public half", keys)
	}
	if _, ok, err := a.AuthenticateToken(context.Background(), sign(t, k.rsa, jose.RS256, "p", claims())); !ok || err != nil {
		t.Errorf("token with a key loaded from its private half: %v %v", ok, err)
	}
}

// TestJWTAuthenticator: the legacy flags map to apiserver's config as in
// kube-apiserver.
func TestJWTAuthenticator(t *testing.T) {
	f := func(name string, cfg Config, want apiserver.JWTAuthenticator) {
		t.Run(name, func(t *testing.T) {
			cfg.IssuerURL, cfg.ClientID, cfg.JWKSFile = issuer, "kgate", "x"
			if err := cfg.defaults(); err != nil {
				t.Fatal(err)
			}
			want.Issuer = apiserver.Issuer{URL: issuer, Audiences: []string{"kgate"}}
			got := cfg.jwtAuthenticator()
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("got  %s\nwant %s", gj, wj)
			}
		})
	}
	user := func(claim, prefix string) apiserver.ClaimMappings {
		return apiserver.ClaimMappings{Username: apiserver.PrefixedClaimOrExpression{Claim: claim, Prefix: ptr.To(prefix)}}
	}
	f("defaults", Config{}, apiserver.JWTAuthenticator{ClaimMappings: user("sub", issuer+"#")})
	f("email", Config{UsernameClaim: "email"}, apiserver.JWTAuthenticator{ClaimMappings: user("email", "")})
	f("email with prefix", Config{UsernameClaim: "email", UsernamePrefix: "e:"}, apiserver.JWTAuthenticator{ClaimMappings: user("email", "e:")})
	f("other claim", Config{UsernameClaim: "name"}, apiserver.JWTAuthenticator{ClaimMappings: user("name", issuer+"#")})
	f("prefix", Config{UsernamePrefix: "oidc:"}, apiserver.JWTAuthenticator{ClaimMappings: user("sub", "oidc:")})
	f("no prefix", Config{UsernamePrefix: "-"}, apiserver.JWTAuthenticator{ClaimMappings: user("sub", "")})
	groups := user("sub", issuer+"#")
	groups.Groups = apiserver.PrefixedClaimOrExpression{Claim: "groups", Prefix: ptr.To("")}
	f("groups", Config{GroupsClaim: "groups"}, apiserver.JWTAuthenticator{ClaimMappings: groups})
	groups.Groups.Prefix = ptr.To("g:")
	f("groups with prefix", Config{GroupsClaim: "groups", GroupsPrefix: "g:"}, apiserver.JWTAuthenticator{ClaimMappings: groups})
	f("groups prefix without claim", Config{GroupsPrefix: "g:"}, apiserver.JWTAuthenticator{ClaimMappings: user("sub", issuer+"#")})
	f("required claims, sorted", Config{RequiredClaims: map[string]string{"hd": "example.com", "env": "prod"}}, apiserver.JWTAuthenticator{
		ClaimMappings: user("sub", issuer+"#"),
		ClaimValidationRules: []apiserver.ClaimValidationRule{
			{Claim: "env", RequiredValue: "prod"}, {Claim: "hd", RequiredValue: "example.com"},
		},
	})
}

// FuzzOIDCToken feeds arbitrary token strings: no panic, and nothing but
// a token signed by the key is authenticated.
func FuzzOIDCToken(f *testing.F) {
	k := testKeys()
	good := sign(f, k.rsa, jose.RS256, kid(0), claims())
	for _, s := range []string{good, "", ".", "..", "a.b.c", "a.b.c.d", "{}", `{"payload":"x"}`, "eyJhbGciOiJub25lIn0.e30.",
		strings.Repeat(".", 1000), good + ".", good[:len(good)/2], "\x00\xff"} {
		f.Add(s)
	}
	a := newAuth(f, Config{IssuerURL: issuer, ClientID: "kgate", JWKSFile: writeJWKS(f, "", k.rsa)})
	f.Fuzz(func(t *testing.T, token string) {
		resp, ok, err := a.AuthenticateToken(context.Background(), token)
		if ok && (err != nil || resp == nil || resp.User == nil) {
			t.Fatalf("ok with %v %v", resp, err)
		}
		if ok && token != good {
			// Only another encoding of the same signed token could pass.
			if resp.User.GetName() != issuer+"#1234" {
				t.Fatalf("token %q authenticated as %q", token, resp.User.GetName())
			}
		}
	})
}
