package discovery

import (
	"bytes"
	"testing"

	"github.com/kgate/kgate/storage/registry"
)

const acceptAggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// TestFollowsRegistry: resources added show up in every document (a new
// group too) with new ETags; removed, they go and the ETags come back.
func TestFollowsRegistry(t *testing.T) {
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	var base, extra []registry.Resource
	for _, r := range registry.Builtin() {
		if (r.Group == "" && r.Resource == "configmaps") || r.Group == "scheduling.k8s.io" {
			extra = append(extra, r)
			continue
		}
		base = append(base, r)
	}
	if len(extra) != 2 {
		t.Fatalf("want configmaps and priorityclasses built in, got %d", len(extra))
	}
	reg, err := registry.New(scheme, base)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewVersion("v1.37.2", "")
	d, err := New(reg, v)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(path, accept string) (Response, bool) {
		t.Helper()
		resp, ok := d.Serve(path, accept)
		if ok && resp.Status != 200 {
			t.Fatalf("%s: status %d", path, resp.Status)
		}
		return resp, ok
	}
	has := func(path, accept, want string) bool {
		resp, ok := serve(path, accept)
		return ok && bytes.Contains(resp.Body, []byte(want))
	}
	type state struct {
		cm, cmAggregated, group, groupAggregated, groupDoc, versionDoc bool
		apiETag, apisETag                                              string
	}
	look := func() state {
		api, _ := serve("/api", acceptAggregated)
		apis, _ := serve("/apis", acceptAggregated)
		_, groupDoc := serve("/apis/scheduling.k8s.io", "application/json")
		_, versionDoc := serve("/apis/scheduling.k8s.io/v1", "application/json")
		return state{
			cm:              has("/api/v1", "application/json", `"name":"configmaps"`),
			cmAggregated:    has("/api", acceptAggregated, `"resource":"configmaps"`),
			group:           has("/apis", "application/json", `"name":"scheduling.k8s.io"`),
			groupAggregated: has("/apis", acceptAggregated, `"resource":"priorityclasses"`),
			groupDoc:        groupDoc,
			versionDoc:      versionDoc,
			apiETag:         api.ETag,
			apisETag:        apis.ETag,
		}
	}

	before := look()
	if before.cm || before.cmAggregated || before.group || before.groupAggregated || before.groupDoc || before.versionDoc {
		t.Fatalf("served before Add: %+v", before)
	}
	if err := reg.Add(extra...); err != nil {
		t.Fatal(err)
	}
	added := look()
	if !added.cm || !added.cmAggregated || !added.group || !added.groupAggregated || !added.groupDoc || !added.versionDoc {
		t.Errorf("not served after Add: %+v", added)
	}
	if added.apiETag == before.apiETag || added.apisETag == before.apisETag {
		t.Errorf("ETags did not change: /api %s, /apis %s", added.apiETag, added.apisETag)
	}
	if err := reg.Remove(extra[0].GVR(), extra[1].GVR()); err != nil {
		t.Fatal(err)
	}
	if after := look(); after != before {
		t.Errorf("after Remove %+v, want as before %+v", after, before)
	}
	if err := d.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
}

// TestKeepsDocumentsItCannotRender: a resource discovery cannot describe
// leaves the documents as they were and says why.
func TestKeepsDocumentsItCannotRender(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewVersion("v1.37.2", "")
	d, err := New(reg, v)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := d.Serve("/apis", acceptAggregated)
	bad := registry.Resource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses", Kind: "PriorityClass", Subresources: []string{"frobnicate"}, Prefix: "/registry/other"}
	if err := reg.Remove(bad.GVR()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(bad); err != nil {
		t.Fatal(err)
	}
	if after, _ := d.Serve("/apis", acceptAggregated); after.ETag != before.ETag {
		t.Error("documents changed to ones that could not be rendered")
	}
	if d.Err() == nil {
		t.Error("Err is nil")
	}
}
