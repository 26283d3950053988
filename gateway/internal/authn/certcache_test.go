package authn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestCertCache(t *testing.T) {
	ca := newTestCA(t, "ca")
	long := ca.issue(t, "long", nil, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) {
		c.NotAfter = time.Now().Add(24 * time.Hour)
	}).Leaf
	short := ca.issue(t, "short", nil, x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) {
		c.NotAfter = time.Now().Add(10 * time.Second)
	}).Leaf
	other := ca.issue(t, "other", nil, x509.ExtKeyUsageClientAuth, nil).Leaf

	type call struct {
		peers   []*x509.Certificate
		advance time.Duration // clock moves before the call
		reject  bool          // the inner authenticator fails this call
		inner   bool          // the inner authenticator must be called
	}
	f := func(name string, max int, calls ...call) {
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			var innerCalls int
			var reject bool
			c := newCertCache(authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
				innerCalls++
				if reject {
					return nil, false, errors.New("rejected")
				}
				return &authenticator.Response{User: &user.DefaultInfo{Name: req.TLS.PeerCertificates[0].Subject.CommonName}}, true, nil
			}))
			c.now = func() time.Time { return now }
			c.max = max
			for i, cl := range calls {
				now = now.Add(cl.advance)
				reject = cl.reject
				before := innerCalls
				req := &http.Request{TLS: &tls.ConnectionState{PeerCertificates: cl.peers}}
				resp, ok, err := c.AuthenticateRequest(req)
				if cl.reject {
					if err == nil || ok {
						t.Errorf("call %d: rejection became %v %v", i, ok, err)
					}
				} else if err != nil || !ok || resp.User.GetName() != cl.peers[0].Subject.CommonName {
					t.Errorf("call %d: got %v %v %v", i, resp, ok, err)
				}
				if called := innerCalls > before; called != cl.inner {
					t.Errorf("call %d: inner called = %v, want %v", i, called, cl.inner)
				}
				if len(c.entries) > max {
					t.Errorf("call %d: %d entries, max %d", i, len(c.entries), max)
				}
			}
		})
	}
	one := []*x509.Certificate{long}
	f("hit", 10, call{peers: one, inner: true}, call{peers: one}, call{peers: one, advance: 59 * time.Second})
	f("ttl", 10, call{peers: one, inner: true}, call{peers: one, advance: time.Minute, inner: true}, call{peers: one})
	f("leaf expiry before ttl", 10,
		call{peers: []*x509.Certificate{short}, inner: true},
		call{peers: []*x509.Certificate{short}, advance: 5 * time.Second},
		call{peers: []*x509.Certificate{short}, advance: 6 * time.Second, inner: true})
	f("intermediate expiry", 10,
		call{peers: []*x509.Certificate{long, short}, inner: true},
		call{peers: []*x509.Certificate{long, short}, advance: 11 * time.Second, inner: true})
	f("intermediates are part of the key", 10,
		call{peers: one, inner: true},
		call{peers: []*x509.Certificate{long, other}, inner: true},
		call{peers: []*x509.Certificate{long, other}})
	f("rejections not cached", 10,
		call{peers: one, reject: true, inner: true},
		call{peers: one, reject: true, inner: true},
		call{peers: one, inner: true},
		call{peers: one})
	f("bounded", 2,
		call{peers: one, inner: true},
		call{peers: []*x509.Certificate{short}, inner: true},
		call{peers: []*x509.Certificate{other}, inner: true},
		call{peers: []*x509.Certificate{other}})

	c := newCertCache(authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		t.Error("inner authenticator called without a certificate")
		return nil, false, nil
	}))
	for _, req := range []*http.Request{{}, {TLS: &tls.ConnectionState{}}} {
		if resp, ok, err := c.AuthenticateRequest(req); resp != nil || ok || err != nil {
			t.Errorf("no certificate: %v %v %v", resp, ok, err)
		}
	}
}

// TestCertCacheConcurrent runs lookups, inserts and evictions at once (for
// -race).
func TestCertCacheConcurrent(t *testing.T) {
	ca := newTestCA(t, "ca")
	var peers [][]*x509.Certificate
	for _, cn := range []string{"a", "b", "c", "d"} {
		peers = append(peers, []*x509.Certificate{ca.issue(t, cn, nil, x509.ExtKeyUsageClientAuth, nil).Leaf})
	}
	c := newCertCache(authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: &user.DefaultInfo{Name: req.TLS.PeerCertificates[0].Subject.CommonName}}, true, nil
	}))
	c.max = 2
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				p := peers[(g+i)%len(peers)]
				resp, ok, err := c.AuthenticateRequest(&http.Request{TLS: &tls.ConnectionState{PeerCertificates: p}})
				if err != nil || !ok || resp.User.GetName() != p[0].Subject.CommonName {
					t.Errorf("got %v %v %v", resp, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
