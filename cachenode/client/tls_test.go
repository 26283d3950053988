package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/storage"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// internalTLS makes an internal plane and loads role from it.
func internalTLS(t testing.TB, role string) *pki.InternalTLS {
	t.Helper()
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := in.LoadRoleTLS(role)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTLS: over the internal plane's mutual TLS a gateway reads; a client
// without a certificate, or with one of another CA, is unavailable.
func TestTLS(t *testing.T) {
	in, err := pki.EnsureInternal(pki.InternalConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	node, err := in.LoadRoleTLS(pki.RoleCacheNode)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := in.LoadRoleTLS(pki.RoleGateway)
	if err != nil {
		t.Fatal(err)
	}
	rng, _ := podsRange(t)
	f := newFakeRange(t, rng, 1)
	f.st = store.Load([]*store.Entry{store.NewEntry("/registry/pods/a/p", "a", "p", 2, labels.Set{}, fields.Set{}, []byte(`{"p":1}`), nil, nil)}, 2)
	noCert := gw.Client(pki.RoleCacheNode)
	noCert.Certificates = nil
	for _, tt := range []struct {
		name string
		cli  *pki.InternalTLS
		ok   bool
	}{
		{"gateway", gw, true},
		{"no certificate", nil, false},
		{"gateway of another CA", internalTLS(t, pki.RoleGateway), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := noCert
			if tt.cli != nil {
				cfg = tt.cli.Client(pki.RoleCacheNode)
			}
			c := serveTLS(t, time.Second, node.Server(pki.RoleGateway), cfg, f)
			o, err := c.Get(context.Background(), "pods", "/registry/pods/a/p", client.Read{}, client.JSON)
			if tt.ok {
				if err != nil || string(o.Data) != `{"p":1}` {
					t.Fatalf("Get = %s, %v", o.Data, err)
				}
				return
			}
			if !errors.Is(err, storage.ErrUnavailable) {
				t.Fatalf("Get = %s, %v; want unavailable", o.Data, err)
			}
		})
	}
}
