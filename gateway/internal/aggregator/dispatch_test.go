package aggregator

import (
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/storage/registry"
)

// TestDispatchServes: only the paths of APIServices with a service are
// dispatched, discovery of their group/version included, and the
// dispatch follows the store's changes.
func TestDispatchServes(t *testing.T) {
	apiService := func(name string, remote bool) *apiregistrationv1.APIService {
		s := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if remote {
			s.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}
		}
		return s
	}
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	store := feed.NewStore(apiService("v1.wardle.example.com", true), apiService("v1.apps", false))
	d, err := NewDispatch(t.Context(), Config{AllowLoopback: true}, Deps{
		Registry: reg, Store: memStore{}, Services: store, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/apis/wardle.example.com/v1", true},
		{"/apis/wardle.example.com/v1/", true},
		{"/apis/wardle.example.com/v1/namespaces/a/flunders/x", true},
		{"/apis/wardle.example.com", false}, // the group's discovery is the gateway's
		{"/apis/wardle.example.com/v2/flunders", false},
		{"/apis/apps/v1/deployments", false}, // local
		{"/api/v1/pods", false},
		{"/apis", false},
	} {
		if got := d.Serves(tt.path); got != tt.want {
			t.Errorf("Serves(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	if err := store.Delete(apiService("v1.wardle.example.com", true)); err != nil {
		t.Fatal(err)
	}
	if d.Serves("/apis/wardle.example.com/v1/flunders") {
		t.Error("a deleted APIService is still dispatched")
	}
	if _, err := NewDispatch(t.Context(), Config{ProxyClientCertFile: "c"}, Deps{
		Registry: reg, Store: memStore{}, Services: store, Logger: slog.New(slog.DiscardHandler),
	}); err == nil {
		t.Error("a certificate without its key is accepted")
	}
}
