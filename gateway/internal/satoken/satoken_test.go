package satoken

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// objects is an in-memory Lookup.
type objects struct {
	mu   sync.Mutex
	objs map[string]Object // resource/namespace/name
}

func (o *objects) put(resource, ns, name, uid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.objs == nil {
		o.objs = map[string]Object{}
	}
	o.objs[resource+"/"+ns+"/"+name] = Object{UID: uid}
}

func (o *objects) remove(resource, ns, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.objs, resource+"/"+ns+"/"+name)
}

func (o *objects) Object(_ context.Context, resource, ns, name string) (Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj, ok := o.objs[resource+"/"+ns+"/"+name]
	if !ok {
		return Object{}, fmt.Errorf("%s %s/%s: %w", resource, ns, name, ErrNotFound)
	}
	return obj, nil
}

const issuer = "https://kubernetes.default.svc.cluster.local"

type fixture struct {
	objs   *objects
	now    time.Time
	tokens *Tokens // signs with key, verifies with key
	other  *Tokens // signs with another key, same issuer
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{objs: &objects{}, now: time.Unix(1_800_000_000, 0)}
	clock := func() time.Time { return f.now }
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if f.tokens, err = New(Config{Issuers: []string{issuer, "https://old"}, SigningKey: key, Lookup: f.objs, Now: clock}); err != nil {
		t.Fatal(err)
	}
	if f.other, err = New(Config{Issuers: []string{issuer}, SigningKey: otherKey, Lookup: f.objs, Now: clock}); err != nil {
		t.Fatal(err)
	}
	f.objs.put("serviceaccounts", "ns", "sa", "uid-sa")
	f.objs.put("pods", "ns", "p", "uid-p")
	return f
}

func (f *fixture) issue(t testing.TB, tokens *Tokens, mod func(*Request)) string {
	t.Helper()
	req := Request{Namespace: "ns", ServiceAccount: Ref{Name: "sa", UID: "uid-sa"}, Audiences: []string{issuer},
		Expiration: time.Hour, ID: "jti-1"}
	if mod != nil {
		mod(&req)
	}
	out, err := tokens.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.now.Add(req.Expiration); !out.ExpiresAt.Equal(want) {
		t.Errorf("ExpiresAt %v, want %v", out.ExpiresAt, want)
	}
	return out.Token
}

func TestAuthenticateToken(t *testing.T) {
	fx := newFixture(t)
	good := fx.issue(t, fx.tokens, nil)
	pod := fx.issue(t, fx.tokens, func(r *Request) {
		r.Pod, r.Node = &Ref{Name: "p", UID: "uid-p"}, &Ref{Name: "node-1", UID: "uid-n"}
	})
	expired := fx.issue(t, fx.tokens, func(r *Request) { r.Expiration = -2 * time.Minute })
	wrongKey := fx.issue(t, fx.other, nil)
	wrongAud := fx.issue(t, fx.tokens, func(r *Request) { r.Audiences = []string{"vault"} })
	noAud := fx.issue(t, fx.tokens, func(r *Request) { r.Audiences = nil })
	staleUID := fx.issue(t, fx.tokens, func(r *Request) { r.ServiceAccount.UID = "uid-old" })
	gonePod := fx.issue(t, fx.tokens, func(r *Request) { r.Pod = &Ref{Name: "gone", UID: "uid-gone"} })
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"sa"`, `"admin"`, 1))) + "." + parts[2]
	unsigned := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."

	type want struct {
		ok, err bool
		extra   map[string][]string
	}
	f := func(name, token string, w want) {
		t.Run(name, func(t *testing.T) {
			resp, ok, err := fx.tokens.AuthenticateToken(context.Background(), token)
			if ok != w.ok || (err != nil) != w.err {
				t.Fatalf("ok=%v err=%v, want ok=%v err=%v", ok, err, w.ok, w.err)
			}
			if !ok {
				if resp != nil {
					t.Errorf("response %+v without ok", resp)
				}
				return
			}
			u := resp.User
			if u.GetName() != "system:serviceaccount:ns:sa" || u.GetUID() != "uid-sa" ||
				!slices.Equal(u.GetGroups(), []string{"system:serviceaccounts", "system:serviceaccounts:ns"}) {
				t.Errorf("user %+v", u)
			}
			for k, v := range w.extra {
				if !slices.Equal(u.GetExtra()[k], v) {
					t.Errorf("extra %s = %q, want %q", k, u.GetExtra()[k], v)
				}
			}
		})
	}
	f("good", good, want{ok: true, extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=jti-1"}}})
	f("bound to pod", pod, want{ok: true, extra: map[string][]string{
		"authentication.kubernetes.io/pod-name": {"p"}, "authentication.kubernetes.io/pod-uid": {"uid-p"},
		"authentication.kubernetes.io/node-name": {"node-1"}, "authentication.kubernetes.io/node-uid": {"uid-n"}}})
	f("expired", expired, want{err: true})
	f("wrong signature", wrongKey, want{err: true})
	f("tampered payload", tampered, want{err: true})
	f("alg none", unsigned, want{})
	f("wrong audience", wrongAud, want{err: true})
	f("no audience", noAud, want{err: true})
	f("service account uid changed", staleUID, want{err: true})
	f("bound pod deleted", gonePod, want{err: true})
	f("missing", "", want{})
	f("not a JWT", "tok-alice", want{})
	f("garbage JWT", "a.b.c", want{})

	// Another issuer's token is not ours: other authenticators may try it.
	foreign, err := New(Config{Issuers: []string{"https://elsewhere"}, SigningKey: fx.tokens.cfg.SigningKey, Lookup: fx.objs,
		Now: func() time.Time { return fx.now }})
	if err != nil {
		t.Fatal(err)
	}
	f("foreign issuer", fx.issue(t, foreign, nil), want{})
	// A second accepted issuer verifies.
	old, err := New(Config{Issuers: []string{"https://old"}, Audiences: []string{issuer}, SigningKey: fx.tokens.cfg.SigningKey,
		Lookup: fx.objs, Now: func() time.Time { return fx.now }})
	if err != nil {
		t.Fatal(err)
	}
	f("second issuer", fx.issue(t, old, nil), want{ok: true})

	// Deleting the service account ends every token of it.
	fx.objs.remove("serviceaccounts", "ns", "sa")
	f("service account deleted", good, want{err: true})
	fx.objs.put("serviceaccounts", "ns", "sa", "uid-new")
	f("service account recreated", good, want{err: true})
}

func TestNotYetValidAndLeeway(t *testing.T) {
	fx := newFixture(t)
	token := fx.issue(t, fx.tokens, nil)
	fx.now = fx.now.Add(-5 * time.Minute)
	if _, ok, err := fx.tokens.AuthenticateToken(context.Background(), token); ok || err == nil {
		t.Errorf("token from the future: ok=%v err=%v", ok, err)
	}
	fx.now = fx.now.Add(5*time.Minute + time.Hour + 30*time.Second)
	if _, ok, err := fx.tokens.AuthenticateToken(context.Background(), token); !ok || err != nil {
		t.Errorf("within a minute of expiry (kube-apiserver's leeway): ok=%v err=%v", ok, err)
	}
}

func TestNewConfig(t *testing.T) {
	objs := &objects{}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, cfg := range map[string]Config{
		"no issuer": {SigningKey: key, Lookup: objs},
		"no lookup": {Issuers: []string{issuer}, SigningKey: key},
		"no keys":   {Issuers: []string{issuer}, Lookup: objs},
		"bad key":   {Issuers: []string{issuer}, Lookup: objs, Keys: []crypto.PublicKey{"nope"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	verifyOnly, err := New(Config{Issuers: []string{issuer}, Lookup: objs, Keys: []crypto.PublicKey{key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	if verifyOnly.CanIssue() {
		t.Error("CanIssue without a signing key")
	}
	if _, err := verifyOnly.Issue(Request{}); err != ErrNoSigningKey {
		t.Errorf("Issue without a signing key: %v", err)
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	signing := filepath.Join(dir, "sub", "sa.key")
	k1, err := EnsureSigningKey(signing)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(signing); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key file: %v %v", fi, err)
	}
	k2, err := EnsureSigningKey(signing)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Public().(*rsa.PublicKey).Equal(k2.Public()) {
		t.Error("EnsureSigningKey made a new key over an existing one")
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(ec.Public())
	ecDER, _ := x509.MarshalECPrivateKey(ec)
	bundle := filepath.Join(dir, "keys.pem")
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})...)
	if err := os.WriteFile(bundle, data, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadPublicKeys(signing, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("%d keys, want 3", len(keys))
	}
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, []byte("nothing"), 0o600)
	if _, err := LoadPublicKeys(empty); err == nil {
		t.Error("a file without keys loaded")
	}
	if _, err := LoadSigningKey(bundle + ".missing"); err == nil {
		t.Error("a missing signing key loaded")
	}
}
