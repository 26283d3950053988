package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// errNoKey: no key of the set verifies the token's signature.
var errNoKey = errors.New("no key in the JWKS file verifies the token")

// keySet is the issuer's public keys, read from a JWKS file. It
// implements go-oidc's KeySet (VerifySignature), which k8s.io/apiserver's
// JWT authenticator takes instead of fetching the issuer's keys.
//
// Key rotation without a goroutine: a verification re-reads the file when
// it was last read more than interval ago, or, when no key verifies the
// token (a new key the issuer just started to sign with), more than
// missInterval ago. The keys change only when the file's content does
// and parses; a bad file keeps the previous keys and is logged.
type keySet struct {
	file         string
	algs         []jose.SignatureAlgorithm
	interval     time.Duration
	missInterval time.Duration
	now          func() time.Time
	log          *slog.Logger

	keys    atomic.Pointer[[]jose.JSONWebKey] // the keys in use
	checked atomic.Int64                      // when the file was last read, Unix ns

	mu  sync.Mutex // guards raw; serializes reads of the file
	raw []byte     // the file content the keys come from
}

// newKeySet reads file: it must hold at least one usable public key.
func newKeySet(file string, algs []string, interval time.Duration, log *slog.Logger) (*keySet, error) {
	ks := &keySet{file: file, interval: interval, missInterval: time.Second, now: time.Now, log: log}
	for _, a := range algs {
		ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read JWKS file: %w", err)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("cannot load JWKS file %s: %w", file, err)
	}
	ks.raw = data
	ks.keys.Store(&keys)
	ks.checked.Store(ks.now().UnixNano())
	return ks, nil
}

// parseJWKS returns the public signing keys of a JSON Web Key Set.
// Private keys are reduced to their public half; symmetric keys and keys
// for encryption are refused, and a set without a usable key is an error.
func parseJWKS(data []byte) ([]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if _, symmetric := k.Key.([]byte); symmetric {
			return nil, fmt.Errorf("key %d (kid %q) is not an asymmetric key", i, k.KeyID)
		}
		pub := k.Public()
		if !k.Valid() || !pub.Valid() {
			return nil, fmt.Errorf("key %d (kid %q) is not valid", i, k.KeyID)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, errors.New("no signing key")
	}
	return keys, nil
}

// VerifySignature implements go-oidc's KeySet: it returns the payload of
// a compact JWS signed by one of the keys with an allowed algorithm.
// Claims are checked by the caller.
func (ks *keySet) VerifySignature(_ context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSigned(token, ks.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must have exactly one signature")
	}
	ks.reload(ks.interval)
	payload, err := verify(jws, *ks.keys.Load())
	if errors.Is(err, errNoKey) && ks.reload(ks.missInterval) {
		payload, err = verify(jws, *ks.keys.Load())
	}
	return payload, err
}

// verify checks jws with the keys whose ID and algorithm match its header.
func verify(jws *jose.JSONWebSignature, keys []jose.JSONWebKey) ([]byte, error) {
	h := jws.Signatures[0].Header
	for _, k := range keys {
		if h.KeyID != "" && k.KeyID != "" && k.KeyID != h.KeyID {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if payload, err := jws.Verify(k.Key); err == nil {
			return payload, nil
		}
	}
	return nil, errNoKey
}

// reload re-reads the file if it was last read at least after ago, and
// reports whether the keys changed.
func (ks *keySet) reload(after time.Duration) bool {
	now := ks.now()
	if now.UnixNano()-ks.checked.Load() < int64(after) {
		return false
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if now.UnixNano()-ks.checked.Load() < int64(after) {
		return false // another caller just read it
	}
	ks.checked.Store(now.UnixNano())
	data, err := os.ReadFile(ks.file)
	if err != nil {
		ks.log.Warn("cannot read the JWKS file; keeping its previous keys", "file", ks.file, "err", err)
		return false
	}
	if bytes.Equal(data, ks.raw) {
		return false
	}
	keys, err := parseJWKS(data)
	if err != nil {
		ks.log.Warn("cannot load the JWKS file; keeping its previous keys", "file", ks.file, "err", err)
		return false
	}
	ks.raw = data
	ks.keys.Store(&keys)
	ks.log.Info("JWKS file reloaded", "file", ks.file, "keys", len(keys))
	return true
}
