package satoken

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// FuzzAuthenticateToken: whatever a client sends as a bearer token, the
// verifier answers without panicking, and only a token it signed (with the
// service account's current uid) authenticates, as that service account.
func FuzzAuthenticateToken(f *testing.F) {
	fx := newFixture(f)
	good := fx.issue(f, fx.tokens, nil)
	bound := fx.issue(f, fx.tokens, func(r *Request) { r.Pod = &Ref{Name: "p", UID: "uid-p"} })
	for _, s := range []string{good, bound, fx.issue(f, fx.other, nil), "", "a.b.c", "..", "eyJhbGciOiJub25lIn0.e30.",
		good[:len(good)-3], strings.Replace(good, ".", "..", 1), good + "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, ok, err := fx.tokens.AuthenticateToken(ctx, token)
		if !ok {
			if resp != nil {
				t.Fatalf("response without ok for %q", token)
			}
			return
		}
		if err != nil {
			t.Fatalf("ok with error %v", err)
		}
		if !sameJWS(token, good) && !sameJWS(token, bound) {
			// RSA signatures are not malleable: anything else that
			// authenticates is a forgery.
			t.Fatalf("token %q authenticated as %s", token, resp.User.GetName())
		}
		if resp.User.GetName() != "system:serviceaccount:ns:sa" {
			t.Fatalf("user %s", resp.User.GetName())
		}
	})
}

// sameJWS reports whether two compact JWS decode to the same header,
// payload and signature (base64 may spell the same bytes more than one
// way in its last character).
func sameJWS(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != 3 || len(pb) != 3 {
		return false
	}
	for i := range pa {
		da, err1 := base64.RawURLEncoding.DecodeString(pa[i])
		db, err2 := base64.RawURLEncoding.DecodeString(pb[i])
		if err1 != nil || err2 != nil || !bytes.Equal(da, db) {
			return false
		}
	}
	return true
}
