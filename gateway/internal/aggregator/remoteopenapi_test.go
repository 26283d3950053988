package aggregator

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/openapi"
)

// extensionSwagger is the test extension server's /openapi/v2: a path
// and a definition for each of its two groups and one outside them.
const extensionSwagger = `{"swagger":"2.0","info":{"title":"ext","version":"v0"},"paths":{
"/apis/example.com/v1/widgets":{"get":{"operationId":"listWidgets","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/com.example.v1.Widget"}}}}},
"/apis/other.example.com/v1/gadgets":{"get":{"operationId":"listGadgets","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/com.example.other.v1.Gadget"}}}}},
"/api/v1/pods":{"get":{"operationId":"listPods","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.api.core.v1.Pod"}}}}}},
"definitions":{"com.example.v1.Widget":{"type":"object"},"com.example.other.v1.Gadget":{"type":"object"},"io.k8s.api.core.v1.Pod":{"type":"object"}}}`

// TestRemoteOpenAPI: each APIService's v2 paths alone, fetched as
// system:aggregator with no group, in priority order; v3 documents
// fetched at the index's addresses, again only when an address changes;
// v2 conditional on its ETag; a server without /openapi/v3 gets its v2
// paths converted; a server gone keeps its documents; a deleted
// APIService's go.
func TestRemoteOpenAPI(t *testing.T) {
	x := startExtension(t)
	api := func(name, group string, groupPriority int32) *apiregistrationv1.APIService {
		return &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
			Spec: apiregistrationv1.APIServiceSpec{Group: group, Version: "v1", CABundle: x.serving.PEM,
				GroupPriorityMinimum: groupPriority, VersionPriority: 10,
				Service: &apiregistrationv1.ServiceReference{Namespace: "ext", Name: "api"}},
			Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue}}},
		}
	}
	store := feed.NewStore(api("v1.example.com", "example.com", 100), api("v1.other.example.com", "other.example.com", 200),
		&apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"}, Spec: apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1"}})
	services := &Services{Store: store}
	p := &Proxy{Services: services, Resolver: &Resolver{Registry: x.reg, Store: x.store, AggregatorRouting: true, AllowLoopback: true},
		CertPEM: x.clientCert, KeyPEM: x.clientKey}
	r := &RemoteOpenAPI{Services: services, Proxy: p, Log: slog.New(slog.DiscardHandler)}
	var _ openapi.Remote = r

	docs := x.openAPI
	docs.set("/openapi/v2", openAPIDoc{etag: `"v2-a"`, body: extensionSwagger})
	index := func(hash string) string {
		return `{"paths":{"apis/example.com/v1":{"serverRelativeURL":"/openapi/v3/apis/example.com/v1?hash=` + hash + `"},` +
			`"apis/example.com":{"serverRelativeURL":"/openapi/v3/apis/example.com?hash=G"},` +
			`"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=C"}}}`
	}
	docs.set("/openapi/v3", openAPIDoc{body: index("A")})
	widgetsV3 := `{"openapi":"3.0.0","info":{"title":"ext","version":"v0"},"paths":{"/apis/example.com/v1/widgets":{}}}`
	docs.set("/openapi/v3/apis/example.com/v1?hash=A", openAPIDoc{body: widgetsV3})
	docs.set("/openapi/v3/apis/example.com?hash=G", openAPIDoc{body: `{"openapi":"3.0.0","paths":{}}`})

	r.Sync(t.Context())
	specs := r.Specs()
	paths := func(s *spec.Swagger) []string { return slices.Sorted(maps.Keys(s.Paths.Paths)) }
	defs := func(s *spec.Swagger) []string { return slices.Sorted(maps.Keys(s.Definitions)) }
	if len(specs.V2) != 2 {
		t.Fatalf("%d v2 specs, want one per APIService", len(specs.V2))
	}
	// other.example.com has the higher groupPriorityMinimum: first.
	if got := paths(specs.V2[0]); !slices.Equal(got, []string{"/apis/other.example.com/v1/gadgets"}) {
		t.Errorf("first v2 spec's paths %v, want other.example.com's alone", got)
	}
	if got := paths(specs.V2[1]); !slices.Equal(got, []string{"/apis/example.com/v1/widgets"}) {
		t.Errorf("second v2 spec's paths %v, want example.com's alone", got)
	}
	if got := defs(specs.V2[1]); !slices.Equal(got, []string{"com.example.v1.Widget"}) {
		t.Errorf("example.com's definitions %v, want those its paths use", got)
	}
	if got := slices.Sorted(maps.Keys(specs.V3)); !slices.Equal(got, []string{"apis/example.com", "apis/example.com/v1"}) {
		t.Errorf("v3 documents %v, want example.com's version and group (other.example.com has none listed)", got)
	}
	if string(specs.V3["apis/example.com/v1"]) != widgetsV3 {
		t.Errorf("apis/example.com/v1: %s", specs.V3["apis/example.com/v1"])
	}
	for _, a := range docs.take() {
		if !strings.HasSuffix(a, "system:aggregator []") {
			t.Errorf("asked %q: want system:aggregator with no group, with no If-None-Match at first", a)
		}
	}
	gen := r.Generation()

	// Due again, nothing changed: v2 asked with its ETag (304), the v3
	// document not fetched again, the same generation.
	r.Refresh = 1
	r.Sync(t.Context())
	asked := docs.take()
	if !slices.Contains(asked, `/openapi/v2 system:aggregator [] "v2-a"`) {
		t.Errorf("v2 not asked with its ETag: %q", asked)
	}
	if slices.ContainsFunc(asked, func(a string) bool { return strings.HasPrefix(a, "/openapi/v3/apis/") }) {
		t.Errorf("a v3 document fetched again at an unchanged address: %q", asked)
	}
	if r.Generation() != gen || len(r.Specs().V2) != 2 {
		t.Errorf("generation %d→%d, %d v2 specs after an unchanged refresh", gen, r.Generation(), len(r.Specs().V2))
	}

	// A new hash: fetched at its new address, a new generation.
	widgetsV3b := strings.Replace(widgetsV3, `"title":"ext"`, `"title":"ext b"`, 1)
	docs.set("/openapi/v3", openAPIDoc{body: index("B")})
	docs.set("/openapi/v3/apis/example.com/v1?hash=B", openAPIDoc{body: widgetsV3b})
	r.Sync(t.Context())
	if string(r.Specs().V3["apis/example.com/v1"]) != widgetsV3b || r.Generation() == gen {
		t.Errorf("after the hash changed: %s (generation %d, was %d)", r.Specs().V3["apis/example.com/v1"], r.Generation(), gen)
	}

	// No /openapi/v3 (404): each version's v2 paths, converted.
	docs.set("/openapi/v3", openAPIDoc{status: 404, body: "{}"})
	r.Sync(t.Context())
	specs = r.Specs()
	if got := slices.Sorted(maps.Keys(specs.V3)); !slices.Equal(got, []string{"apis/example.com/v1", "apis/other.example.com/v1"}) {
		t.Fatalf("converted v3 documents %v", got)
	}
	var converted struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(specs.V3["apis/other.example.com/v1"], &converted); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(converted.OpenAPI, "3.") || !slices.Equal(slices.Sorted(maps.Keys(converted.Paths)), []string{"/apis/other.example.com/v1/gadgets"}) {
		t.Errorf("converted document: %+v", converted)
	}

	// The server goes: the documents stay.
	gen = r.Generation()
	x.backend.Close()
	r.Sync(t.Context())
	if r.Generation() != gen || len(r.Specs().V2) != 2 {
		t.Errorf("a server gone lost its documents (generation %d→%d)", gen, r.Generation())
	}

	// Deleted: gone.
	if err := store.Delete(api("v1.other.example.com", "other.example.com", 200)); err != nil {
		t.Fatal(err)
	}
	r.Sync(t.Context())
	specs = r.Specs()
	if len(specs.V2) != 1 || paths(specs.V2[0])[0] != "/apis/example.com/v1/widgets" || specs.V3["apis/other.example.com/v1"] != nil {
		t.Errorf("after other.example.com was deleted: %d v2 specs, v3 %v", len(specs.V2), slices.Sorted(maps.Keys(specs.V3)))
	}
}
