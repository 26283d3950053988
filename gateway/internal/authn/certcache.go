package authn

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// Defaults of certCache.
const (
	certCacheTTL = time.Minute
	certCacheMax = 4096
)

// certCache remembers the client certificate chains that an authenticator
// accepted, so that the requests of one connection (or of one client
// reconnecting) do not each pay a signature verification (~100 µs for
// ECDSA P-256, the whole cost of the certificate path). The authenticator's
// answer must depend on the presented chain alone: the x509 authenticator
// (the user is the certificate's) and the front-proxy check (the chain is
// an allowed proxy's; proxyAuth) qualify. An entry lives until the earliest
// NotAfter of the presented certificates, and at most ttl, so a chain is
// never accepted after it would have been rejected by more than ttl (the
// CA itself may expire first). Rejections are not cached.
type certCache struct {
	auth authenticator.Request // answers from the chain alone
	now  func() time.Time
	ttl  time.Duration
	max  int

	mu      sync.RWMutex // guards entries
	entries map[[sha256.Size]byte]certEntry
}

type certEntry struct {
	resp  *authenticator.Response
	until time.Time
}

func newCertCache(auth authenticator.Request) *certCache {
	return &certCache{
		auth:    auth,
		now:     time.Now,
		ttl:     certCacheTTL,
		max:     certCacheMax,
		entries: make(map[[sha256.Size]byte]certEntry),
	}
}

// AuthenticateRequest implements authenticator.Request.
func (c *certCache) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	peers := req.TLS.PeerCertificates
	key := chainKey(peers)
	now := c.now()
	c.mu.RLock()
	e, hit := c.entries[key]
	c.mu.RUnlock()
	if hit && now.Before(e.until) {
		return e.resp, true, nil
	}

	resp, ok, err := c.auth.AuthenticateRequest(req)
	if err != nil || !ok {
		return resp, ok, err
	}
	until := now.Add(c.ttl)
	for _, p := range peers {
		if p.NotAfter.Before(until) {
			until = p.NotAfter
		}
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.max {
			clear(c.entries)
		}
	}
	c.entries[key] = certEntry{resp: resp, until: until}
	c.mu.Unlock()
	return resp, true, nil
}

// chainKey identifies the presented chain: intermediates take part in
// verification, so they are part of the key.
func chainKey(peers []*x509.Certificate) [sha256.Size]byte {
	if len(peers) == 1 {
		return sha256.Sum256(peers[0].Raw)
	}
	h := sha256.New()
	var n [8]byte
	for _, p := range peers {
		binary.BigEndian.PutUint64(n[:], uint64(len(p.Raw)))
		h.Write(n[:])
		h.Write(p.Raw)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}
