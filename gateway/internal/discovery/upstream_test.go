package discovery

//go:generate sh -c "cd upstreamgen && go run . > ../testdata/upstream.json"

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/registry"
)

// upstreamResource is one line of testdata/upstream.json: what
// kube-apiserver 1.37 serves by default, recorded by upstreamgen from
// upstream's own storage providers and installer (see its doc).
type upstreamResource struct {
	Group     string                              `json:"group"`
	Version   string                              `json:"version"`
	Resource  string                              `json:"resource"`
	Discovery apidiscoveryv2.APIResourceDiscovery `json:"discovery"`
	Prefix    string                              `json:"prefix"`
}

// TestUpstreamRecordingIsCurrent checks that testdata/upstream.json was
// recorded from the k8s.io/kubernetes version kgate builds with, by a
// generator pinned to that version too: the recording depends on nothing
// else (the generator takes upstream's defaults), so a version bump is
// what makes it stale. Regenerate with `go generate ./gateway/internal/discovery`.
func TestUpstreamRecordingIsCurrent(t *testing.T) {
	version := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
			if len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
				return f[1]
			}
		}
		t.Fatalf("%s requires no k8s.io/kubernetes", path)
		return ""
	}
	kgate := version("../../../go.mod")
	if gen := version("upstreamgen/go.mod"); gen != kgate {
		t.Errorf("upstreamgen/go.mod pins k8s.io/kubernetes %s, kgate's go.mod %s", gen, kgate)
	}
	raw, err := os.ReadFile("testdata/upstream.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Kubernetes string `json:"kubernetes"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Kubernetes != kgate {
		t.Errorf("testdata/upstream.json records k8s.io/kubernetes %s, kgate builds with %s: run go generate ./gateway/internal/discovery", rec.Kubernetes, kgate)
	}
}

// notYet lists what kube-apiserver serves by default and kgate does not
// yet, each with the reason, by "group/version/resource" or
// ".../resource/subresource". The test fails when an entry is served
// after all (so that the list only shrinks).
var notYet = map[string]string{
	"/v1/componentstatuses":                   "answered from the health of etcd and the controllers; no handler in kgate yet",
	"autoscaling/v1/horizontalpodautoscalers": "stored as autoscaling/v2: needs a v1↔v2 conversion in gateway/internal/convert",
}

// describe renders what discovery says about one resource in a form that
// diffs readably: scope, singular, kind, verbs, short names, categories,
// and each subresource's kind and verbs (sorted lists; upstream's order of
// verbs and names is alphabetical or not significant to clients).
func describe(d apidiscoveryv2.APIResourceDiscovery) map[string]string {
	sorted := func(s []string) string {
		c := slices.Clone(s)
		sort.Strings(c)
		return strings.Join(c, ",")
	}
	kind := func(k *metav1.GroupVersionKind) string {
		if k == nil {
			return "<none>"
		}
		return k.Group + "/" + k.Version + "/" + k.Kind
	}
	out := map[string]string{
		"scope":      string(d.Scope),
		"singular":   d.SingularResource,
		"kind":       kind(d.ResponseKind),
		"verbs":      sorted(d.Verbs),
		"shortNames": sorted(d.ShortNames),
		"categories": sorted(d.Categories),
	}
	for _, s := range d.Subresources {
		out[s.Subresource] = "kind " + kind(s.ResponseKind) + ", verbs " + sorted(s.Verbs)
	}
	return out
}

// TestDiscoveryMatchesUpstream compares kgate's discovery of the built-in
// resources with kube-apiserver's default discovery: every resource,
// subresource, verb, short name and category, and each resource's etcd
// prefix.
func TestDiscoveryMatchesUpstream(t *testing.T) {
	raw, err := os.ReadFile("testdata/upstream.json")
	if err != nil {
		t.Fatalf("cannot read the recorded upstream discovery (go generate ./gateway/internal/discovery): %v", err)
	}
	var rec struct {
		Kubernetes string             `json:"kubernetes"`
		Resources  []upstreamResource `json:"resources"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("cannot decode testdata/upstream.json: %v", err)
	}
	upstream := rec.Resources
	if len(upstream) < 50 {
		t.Fatalf("testdata/upstream.json lists %d resources: not a recording of kube-apiserver", len(upstream))
	}
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	snap := reg.Snapshot()

	// kgate's aggregated discovery, per group/version/resource.
	ours := map[string]apidiscoveryv2.APIResourceDiscovery{}
	prefixes := map[string]string{}
	for _, g := range snap.Groups() {
		for _, v := range g.Versions {
			list, err := apiResources(snap, g.Group, v)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range aggregatedResources(list) {
				key := g.Group + "/" + v + "/" + d.Resource
				ours[key] = d
				if res, ok := snap.Lookup(schema.GroupVersionResource{Group: g.Group, Version: v, Resource: d.Resource}); ok {
					prefixes[key] = res.Prefix
				}
			}
		}
	}

	stillMissing := map[string]bool{}
	seen := map[string]bool{}
	for _, u := range upstream {
		key := u.Group + "/" + u.Version + "/" + u.Resource
		seen[key] = true
		got, ok := ours[key]
		if !ok {
			if _, known := notYet[key]; known {
				stillMissing[key] = true
				continue
			}
			t.Errorf("%s: served by kube-apiserver, missing in kgate", key)
			continue
		}
		want := describe(u.Discovery)
		have := describe(got)
		for field, w := range want {
			h, ok := have[field]
			sub := key + "/" + field
			if _, known := notYet[sub]; known && !ok {
				stillMissing[sub] = true
				continue
			}
			if !ok {
				t.Errorf("%s: subresource missing in kgate (upstream: %s)", sub, w)
			} else if h != w {
				t.Errorf("%s %s: kgate %q, upstream %q", key, field, h, w)
			}
		}
		for field, h := range have {
			if _, ok := want[field]; !ok {
				t.Errorf("%s/%s: served by kgate, not by kube-apiserver (%s)", key, field, h)
			}
		}
		if res, ok := snap.Lookup(schema.GroupVersionResource{Group: u.Group, Version: u.Version, Resource: u.Resource}); ok && res.CreateOnly() {
			// Nothing stored either way (kgate's bindings carry a
			// prefix that nothing is written under).
		} else if p := prefixes[key]; p != u.Prefix {
			t.Errorf("%s: etcd prefix %q, upstream %q", key, p, u.Prefix)
		}
	}
	for key := range ours {
		if !seen[key] {
			t.Errorf("%s: served by kgate, not by kube-apiserver by default", key)
		}
	}
	for key, why := range notYet {
		if !stillMissing[key] {
			t.Errorf("notYet lists %s (%s), but it is served (or no longer upstream): remove the entry", key, why)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprintf("kgate serves %d resources, kube-apiserver %d", len(ours), len(upstream)))
	}
}
