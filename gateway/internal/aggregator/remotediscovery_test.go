package aggregator

import (
	"log/slog"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kgate/kgate/gateway/internal/discovery"
	"github.com/kgate/kgate/gateway/internal/feed"
)

// TestRemoteDiscovery: the extension server's group/version is fetched
// through the proxy as system:kube-aggregator; an unavailable APIService
// is left out; once its server is gone the version stays, stale; a
// deleted APIService leaves; groups and versions come in upstream's
// priority order.
func TestRemoteDiscovery(t *testing.T) {
	x := startExtension(t)
	api := func(name, group, version string, groupPriority, versionPriority int32, available bool) *apiregistrationv1.APIService {
		st := apiregistrationv1.ConditionFalse
		if available {
			st = apiregistrationv1.ConditionTrue
		}
		return &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
			Spec: apiregistrationv1.APIServiceSpec{Group: group, Version: version, CABundle: x.serving.PEM,
				GroupPriorityMinimum: groupPriority, VersionPriority: versionPriority,
				Service: &apiregistrationv1.ServiceReference{Namespace: "ext", Name: "api"}},
			Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: st}}},
		}
	}
	store := feed.NewStore(
		api("v1.example.com", "example.com", "v1", 100, 10, true),
		api("v1.down.example.com", "down.example.com", "v1", 200, 10, false),
		&apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"}, Spec: apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1"}},
	)
	services := &Services{Store: store}
	p := &Proxy{Services: services, Resolver: &Resolver{Registry: x.reg, Store: x.store, AggregatorRouting: true, AllowLoopback: true},
		CertPEM: x.clientCert, KeyPEM: x.clientKey}
	r := &RemoteDiscovery{Services: services, Proxy: p, Log: slog.New(slog.DiscardHandler)}

	gen := r.Generation()
	r.Sync(t.Context())
	groups := r.Groups()
	if len(groups) != 1 || groups[0].Name != "example.com" || len(groups[0].Versions) != 1 {
		t.Fatalf("groups %+v, want example.com alone (down.example.com is not Available, apps is local)", groups)
	}
	v := groups[0].Versions[0]
	names := func(rs []metav1.APIResource) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	if v.Version != "v1" || v.Stale || !slices.Equal(names(v.Resources), []string{"widgets", "widgets/status", "system:kube-aggregator.system:masters"}) {
		t.Errorf("example.com/v1: %+v, want widgets and widgets/status, fresh, fetched as system:kube-aggregator in system:masters", v)
	}
	if r.Generation() == gen {
		t.Error("the generation did not change with the groups")
	}

	// Nothing changed, nothing due: the same generation.
	gen = r.Generation()
	r.Sync(t.Context())
	if r.Generation() != gen {
		t.Error("the generation changed without a change")
	}

	// A second version of higher priority comes first; the group with a
	// higher groupPriorityMinimum comes first; a document describing
	// another group/version is refused.
	up := api("v1.down.example.com", "down.example.com", "v1", 200, 10, true)
	up.ResourceVersion = "2" // became Available
	for _, s := range []*apiregistrationv1.APIService{
		api("v2.example.com", "example.com", "v2", 100, 20, true),
		up,
		api("v1.liar.example.com", "liar.example.com", "v1", 300, 10, true),
	} {
		if err := store.Upsert(s); err != nil {
			t.Fatal(err)
		}
	}
	r.Sync(t.Context())
	order := func(groups []discovery.RemoteGroup) []string {
		var out []string
		for _, g := range groups {
			for _, v := range g.Versions {
				stale := ""
				if v.Stale {
					stale = " (stale)"
				}
				out = append(out, v.Version+"."+g.Name+stale)
			}
		}
		return out
	}
	if got, want := order(r.Groups()), []string{"v1.down.example.com", "v2.example.com", "v1.example.com"}; !slices.Equal(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}

	// The server goes: the versions stay, stale, after the next try.
	x.backend.Close()
	r.Refresh = 1 // every version due at once
	r.Sync(t.Context())
	if got, want := order(r.Groups()), []string{"v1.down.example.com (stale)", "v2.example.com (stale)", "v1.example.com (stale)"}; !slices.Equal(got, want) {
		t.Errorf("groups %v once the server is gone, want %v", got, want)
	}
	if got := r.Groups()[1].Versions[1].Resources; len(got) != 3 {
		t.Errorf("a stale version keeps %d resources, want its 3", len(got))
	}

	// Deleted: gone.
	if err := store.Delete(api("v1.example.com", "example.com", "v1", 100, 10, true)); err != nil {
		t.Fatal(err)
	}
	r.Sync(t.Context())
	if got, want := order(r.Groups()), []string{"v1.down.example.com (stale)", "v2.example.com (stale)"}; !slices.Equal(got, want) {
		t.Errorf("groups %v after v1.example.com was deleted, want %v", got, want)
	}
	var _ discovery.Remote = r
}
