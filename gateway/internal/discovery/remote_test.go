package discovery

import (
	"encoding/json"
	"sync"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage/registry"
)

// remote is a Remote whose groups the test sets.
type remote struct {
	mu     sync.Mutex
	gen    uint64
	groups []RemoteGroup
}

func (r *remote) Generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

func (r *remote) Groups() []RemoteGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.groups
}

func (r *remote) set(groups ...RemoteGroup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = groups
	r.gen++
}

// TestRemoteGroups: an extension server's group is in /apis after the
// local groups, in legacy and aggregated form (freshness from Stale,
// subresources nested, a stub parent for an orphan subresource), has its
// /apis/<group> document, follows each change, and never shadows a group
// kgate serves itself.
func TestRemoteGroups(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewVersion("v1.37.2", "")
	d, err := New(reg, v)
	if err != nil {
		t.Fatal(err)
	}
	r := &remote{}
	d.SetRemote(r)
	metrics := RemoteGroup{Name: "metrics.k8s.io", Versions: []RemoteVersion{{Version: "v1beta1", Resources: []metav1.APIResource{
		{Name: "pods", SingularName: "", Namespaced: true, Kind: "PodMetrics", Verbs: []string{"get", "list"}},
		{Name: "nodes", Kind: "NodeMetrics", Verbs: []string{"get", "list"}},
		{Name: "things/status", Kind: "Thing", Verbs: []string{"get"}},
	}}}}
	shadow := RemoteGroup{Name: "apps", Versions: []RemoteVersion{{Version: "v9"}}}
	r.set(metrics, shadow)

	groupList := func() metav1.APIGroupList {
		t.Helper()
		resp, ok := d.Serve("/apis", "application/json")
		if !ok {
			t.Fatal("no /apis")
		}
		var l metav1.APIGroupList
		if err := json.Unmarshal(resp.Body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	aggregated := func() (apidiscoveryv2.APIGroupDiscoveryList, string) {
		t.Helper()
		resp, ok := d.Serve("/apis", acceptAggregated)
		if !ok {
			t.Fatal("no /apis")
		}
		var l apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(resp.Body, &l); err != nil {
			t.Fatal(err)
		}
		return l, resp.ETag
	}

	l := groupList()
	last := l.Groups[len(l.Groups)-1]
	if last.Name != "metrics.k8s.io" || last.PreferredVersion.GroupVersion != "metrics.k8s.io/v1beta1" {
		t.Errorf("last group of /apis %+v, want metrics.k8s.io/v1beta1", last)
	}
	for _, g := range l.Groups {
		if g.Name == "apps" && len(g.Versions) != 1 {
			t.Errorf("apps versions %+v: an extension server's APIService shadowed a local group", g.Versions)
		}
	}
	if resp, ok := d.Serve("/apis/metrics.k8s.io", "application/json"); !ok || resp.Status != 200 {
		t.Error("no /apis/metrics.k8s.io")
	}
	agg, etag := aggregated()
	ag := agg.Items[len(agg.Items)-1]
	if ag.Name != "metrics.k8s.io" || len(ag.Versions) != 1 || ag.Versions[0].Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Fatalf("last aggregated group %+v, want metrics.k8s.io v1beta1 Current", ag)
	}
	res := ag.Versions[0].Resources
	if len(res) != 3 || res[0].Resource != "pods" || res[0].Scope != apidiscoveryv2.ScopeNamespace || res[1].Scope != apidiscoveryv2.ScopeCluster ||
		res[2].Resource != "things" || len(res[2].Subresources) != 1 || res[2].Subresources[0].Subresource != "status" {
		t.Errorf("aggregated resources %+v, want pods, nodes and a stub things with its status", res)
	}

	// Stale, then gone.
	metrics.Versions[0].Stale = true
	r.set(metrics)
	agg, etag2 := aggregated()
	if got := agg.Items[len(agg.Items)-1].Versions[0].Freshness; got != apidiscoveryv2.DiscoveryFreshnessStale {
		t.Errorf("freshness %q of a stale version, want Stale", got)
	}
	if etag2 == etag {
		t.Error("the ETag did not change with the document")
	}
	r.set()
	if l := groupList(); l.Groups[len(l.Groups)-1].Name == "metrics.k8s.io" {
		t.Error("metrics.k8s.io still listed once gone")
	}
	if _, ok := d.Serve("/apis/metrics.k8s.io", "application/json"); ok {
		t.Error("/apis/metrics.k8s.io still served once gone")
	}
}
