package discovery

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/kgate/kgate/storage/registry"
)

func newDiscovery(t *testing.T) *Discovery {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVersion("v1.37.2", "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(reg, v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// server wraps Serve the way the gateway's router does and records the
// paths clients ask for.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func newServer(t *testing.T, d *Discovery) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		resp, ok := d.Serve(r.URL.Path, r.Header.Get("Accept"))
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		if resp.ETag != "" {
			w.Header().Set("ETag", resp.ETag)
			w.Header().Set("Vary", "Accept")
			if resp.NotModified(r.Header.Get("If-None-Match")) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		w.Header().Set("Content-Type", resp.ContentType)
		w.WriteHeader(resp.Status)
		_, _ = w.Write(resp.Body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requested() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.paths)
}

func (s *server) client(t *testing.T) *discovery.DiscoveryClient {
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// flatten lists "group/version resource kind verbs" lines for comparison.
func flatten(lists []*metav1.APIResourceList) []string {
	var out []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			out = append(out, l.GroupVersion+" "+r.Name+" "+r.Group+"/"+r.Version+"/"+r.Kind+" "+strings.Join(r.Verbs, ",")+
				" ns="+boolString(r.Namespaced)+" short="+strings.Join(r.ShortNames, ",")+" cat="+strings.Join(r.Categories, ",")+" singular="+r.SingularName)
		}
	}
	sort.Strings(out)
	return out
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestClientGoUsesAggregatedDiscovery(t *testing.T) {
	s := newServer(t, newDiscovery(t))
	groups, lists, err := s.client(t).ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.requested() {
		if p != "/api" && p != "/apis" {
			t.Errorf("client fetched %s: aggregated discovery was not used", p)
		}
	}
	if groups[0].Name != "" || groups[0].PreferredVersion.GroupVersion != "v1" {
		t.Errorf("first group = %q, want the core group", groups[0].Name)
	}
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	for _, want := range []string{"apps", "batch", "rbac.authorization.k8s.io", "events.k8s.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("groups %v lack %s", names, want)
		}
	}
	got := flatten(lists)
	for _, want := range []string{
		"v1 pods //Pod create,delete,deletecollection,get,list,patch,update,watch ns=true short=po cat=all singular=pod",
		"v1 pods/status //Pod get,patch,update ns=true short= cat= singular=pod",
		"v1 pods/binding //Binding create ns=true short= cat= singular=pod",
		"v1 namespaces/finalize //Namespace update ns=false short= cat= singular=namespace",
		"v1 bindings //Binding create ns=true short= cat= singular=binding",
		"apps/v1 deployments //Deployment create,delete,deletecollection,get,list,patch,update,watch ns=true short=deploy cat=all singular=deployment",
		"apps/v1 deployments/scale autoscaling/v1/Scale get,patch,update ns=true short= cat= singular=deployment",
		"apps/v1 deployments/status //Deployment get,patch,update ns=true short= cat= singular=deployment",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("aggregated discovery lacks %q", want)
		}
	}
}

// TestAggregatedMatchesLegacy checks the aggregated documents say what the
// per group/version documents say, through client-go's own conversion.
// (client-go drops singularName of subresources in aggregated form, so
// subresources are compared without it.)
func TestAggregatedMatchesLegacy(t *testing.T) {
	s := newServer(t, newDiscovery(t))
	_, agg, err := s.client(t).ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	_, legacy, err := s.client(t).WithLegacy().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range legacy {
		for i := range l.APIResources {
			if strings.Contains(l.APIResources[i].Name, "/") && l.APIResources[i].SingularName != "" {
				t.Errorf("legacy %s has singularName %q, kube-apiserver leaves it empty", l.APIResources[i].Name, l.APIResources[i].SingularName)
			}
		}
	}
	for _, l := range agg {
		for i := range l.APIResources {
			if strings.Contains(l.APIResources[i].Name, "/") {
				l.APIResources[i].SingularName = ""
			}
		}
	}
	a, b := flatten(agg), flatten(legacy)
	if !slices.Equal(a, b) {
		t.Errorf("aggregated and legacy discovery differ:\naggregated %v\nlegacy     %v", a, b)
	}
}

func TestServerPreferredResources(t *testing.T) {
	s := newServer(t, newDiscovery(t))
	lists, err := s.client(t).ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				t.Errorf("preferred resources include subresource %s", r.Name)
			}
			got[l.GroupVersion+"/"+r.Name] = r.Kind
		}
	}
	for key, kind := range map[string]string{
		"v1/configmaps":                           "ConfigMap",
		"apps/v1/deployments":                     "Deployment",
		"autoscaling/v2/horizontalpodautoscalers": "HorizontalPodAutoscaler",
		"events.k8s.io/v1/events":                 "Event",
	} {
		if got[key] != kind {
			t.Errorf("preferred %s = %q, want %q", key, got[key], kind)
		}
	}
}

func TestRESTMapper(t *testing.T) {
	s := newServer(t, newDiscovery(t))
	dc := memory.NewMemCacheClient(s.client(t))
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, func(string) {})

	resources := []struct {
		in   schema.GroupVersionResource
		want schema.GroupVersionResource
	}{
		{schema.GroupVersionResource{Resource: "deploy"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
		{schema.GroupVersionResource{Resource: "po"}, schema.GroupVersionResource{Version: "v1", Resource: "pods"}},
		{schema.GroupVersionResource{Resource: "cm"}, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
		{schema.GroupVersionResource{Resource: "netpol"}, schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}},
		{schema.GroupVersionResource{Resource: "events"}, schema.GroupVersionResource{Version: "v1", Resource: "events"}},
		{schema.GroupVersionResource{Resource: "hpa"}, schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}},
		{schema.GroupVersionResource{Resource: "deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
		{schema.GroupVersionResource{Group: "events.k8s.io", Resource: "events"}, schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}},
	}
	for _, tc := range resources {
		got, err := mapper.ResourceFor(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ResourceFor(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}

	// "ev" names both core and events.k8s.io events, as in kube-apiserver;
	// client-go picks whichever its (unordered) aggregated result lists first.
	ev, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: "ev"})
	if err != nil || ev.Resource != "events" {
		t.Errorf("ResourceFor(ev) = %v, %v", ev, err)
	}

	kind, err := mapper.KindFor(schema.GroupVersionResource{Resource: "sts"})
	if err != nil || kind != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}) {
		t.Errorf("KindFor(sts) = %v, %v", kind, err)
	}
	m, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Resource.Resource != "deployments" || m.Scope.Name() != "namespace" {
		t.Errorf("RESTMapping(Deployment) = %v scope %s", m.Resource, m.Scope.Name())
	}
	m, err = mapper.RESTMapping(schema.GroupKind{Kind: "Node"}, "v1")
	if err != nil || m.Scope.Name() != "root" {
		t.Errorf("RESTMapping(Node) = %v, %v", m, err)
	}

	cats := restmapper.NewDiscoveryCategoryExpander(dc)
	all, ok := cats.Expand("all")
	if !ok || !slices.Contains(all, schema.GroupResource{Group: "apps", Resource: "deployments"}) ||
		!slices.Contains(all, schema.GroupResource{Resource: "pods"}) {
		t.Errorf("category all = %v", all)
	}
}

func TestServerVersion(t *testing.T) {
	s := newServer(t, newDiscovery(t))
	v, err := s.client(t).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2+kgate.0.1.0" || v.Major != "1" || v.Minor != "37" || v.Platform == "" || v.GoVersion == "" {
		t.Errorf("version = %+v", v)
	}
	sv, err := utilversion.ParseSemantic(v.GitVersion)
	if err != nil || !sv.AtLeast(utilversion.MustParseSemantic("v1.37.2")) {
		t.Errorf("kubectl cannot use %q: %v", v.GitVersion, err)
	}
}

func TestNewVersion(t *testing.T) {
	f := func(kube, build, want string, wantErr bool) {
		t.Helper()
		v, err := NewVersion(kube, build)
		if (err != nil) != wantErr {
			t.Fatalf("NewVersion(%q, %q) error = %v", kube, build, err)
		}
		if err == nil && v.GitVersion != want {
			t.Errorf("NewVersion(%q, %q) = %q, want %q", kube, build, v.GitVersion, want)
		}
		if err == nil {
			if _, err := utilversion.ParseSemantic(v.GitVersion); err != nil {
				t.Errorf("%q does not parse: %v", v.GitVersion, err)
			}
		}
	}
	f("v1.37.2", "", "v1.37.2+kgate", false)
	f("1.37.2", "0.3.0", "v1.37.2+kgate.0.3.0", false)
	f("v1.37.2", "dev+dirty", "v1.37.2+kgate.dev-dirty", false)
	f("v1.37.2", "a..b", "v1.37.2+kgate.a.-.b", false)
	f("v1.37", "", "", true)
	f("v1.37.2-rc.1", "", "", true)
}

func TestNegotiate(t *testing.T) {
	const v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	tests := []struct {
		accept       string
		canAggregate bool
		want         choice
		ok           bool
	}{
		{"", true, choice{format: formatJSON}, true},
		{"application/json", true, choice{format: formatJSON}, true},
		{v2 + ",application/json", true, choice{format: formatJSON, aggregated: true}, true},
		{"application/json," + v2, true, choice{format: formatJSON, aggregated: true}, true},
		{v2 + ",application/json", false, choice{format: formatJSON}, true},
		{v2, false, choice{}, false},
		{"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", true, choice{format: formatJSON}, true},
		{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", true, choice{format: formatProtobuf, aggregated: true}, true},
		{"application/vnd.kubernetes.protobuf, */*", false, choice{format: formatProtobuf}, true},
		{"application/yaml", false, choice{format: formatYAML}, true},
		{"*/*", false, choice{format: formatJSON}, true},
		{"application/*", false, choice{format: formatJSON}, true},
		{"text/html", false, choice{}, false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io", false, choice{}, false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", false, choice{format: formatJSON}, true},
		{"application/json;q=0.5,application/yaml", false, choice{format: formatYAML}, true},
		{v2 + ";profile=nopeer," + v2 + ",application/json", true, choice{format: formatJSON, aggregated: true}, true},
		{"application/json;sv=v1", false, choice{}, false},
	}
	for _, tc := range tests {
		got, ok := negotiate(tc.accept, tc.canAggregate)
		if got != tc.want || ok != tc.ok {
			t.Errorf("negotiate(%q, %v) = %+v, %v; want %+v, %v", tc.accept, tc.canAggregate, got, ok, tc.want, tc.ok)
		}
	}
}

func TestServe(t *testing.T) {
	d := newDiscovery(t)
	const v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
	tests := []struct {
		path, accept    string
		ok              bool
		status          int
		contentType     string
		bodyHas, bodyNo string
	}{
		{"/api", "", true, 200, "application/json", `"kind":"APIVersions","versions":["v1"]`, `"apiVersion"`},
		{"/api/", "", true, 200, "application/json", `"kind":"APIVersions"`, ""},
		{"/api/v1", "", true, 200, "application/json", `{"kind":"APIResourceList","groupVersion":"v1","resources":[`, `"apiVersion"`},
		{"/apis", "", true, 200, "application/json", `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}}`, ""},
		{"/apis/apps", "", true, 200, "application/json", `{"kind":"APIGroup","apiVersion":"v1","name":"apps"`, ""},
		{"/apis/apps/v1", "", true, 200, "application/json", `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1"`, ""},
		{"/apis/apps/v1", "application/yaml", true, 200, "application/yaml", "groupVersion: apps/v1", ""},
		{"/apis", v2, true, 200, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", `"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2"`, ""},
		{"/api", v2, true, 200, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", `"responseKind":{"group":"","version":"","kind":"Pod"}`, ""},
		{"/apis/apps/v1", v2, true, 200, "application/json", `"kind":"APIResourceList"`, ""},
		{"/apis/apps", "text/html", true, 406, "application/json", `"reason": "NotAcceptable"`, ""},
		{"/version", "text/html", true, 200, "application/json", `"gitVersion": "v1.37.2+kgate.0.1.0"`, ""},
		{"/apis/apps/v2", "", false, 0, "", "", ""},
		{"/apis/example.com", "", false, 0, "", "", ""},
		{"/api/v1/pods", "", false, 0, "", "", ""},
	}
	for _, tc := range tests {
		resp, ok := d.Serve(tc.path, tc.accept)
		if ok != tc.ok {
			t.Errorf("Serve(%s, %q) ok = %v", tc.path, tc.accept, ok)
			continue
		}
		if !ok {
			continue
		}
		if resp.Status != tc.status || resp.ContentType != tc.contentType {
			t.Errorf("Serve(%s, %q) = %d %s, want %d %s", tc.path, tc.accept, resp.Status, resp.ContentType, tc.status, tc.contentType)
		}
		if !strings.Contains(string(resp.Body), tc.bodyHas) {
			t.Errorf("Serve(%s, %q) body lacks %s:\n%.400s", tc.path, tc.accept, tc.bodyHas, resp.Body)
		}
		if tc.bodyNo != "" && strings.Contains(string(resp.Body), tc.bodyNo) {
			t.Errorf("Serve(%s, %q) body has %s", tc.path, tc.accept, tc.bodyNo)
		}
	}
}

func TestStorageVersionHash(t *testing.T) {
	d := newDiscovery(t)
	hashes := map[string]string{}
	for _, path := range []string{"/api/v1", "/apis/apps/v1", "/apis/events.k8s.io/v1"} {
		resp, _ := d.Serve(path, "")
		var l metav1.APIResourceList
		if err := json.Unmarshal(resp.Body, &l); err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				if r.StorageVersionHash != "" {
					t.Errorf("subresource %s has a storage version hash", r.Name)
				}
				continue
			}
			hashes[l.GroupVersion+"/"+r.Name] = r.StorageVersionHash
		}
	}
	// Values as published by kube-apiserver.
	for key, want := range map[string]string{
		"v1/pods":             "xPOwRZ+Yhw8=",
		"v1/configmaps":       "qFsyl6wFWjQ=",
		"apps/v1/deployments": "8aSe+NMegvE=",
	} {
		if hashes[key] != want {
			t.Errorf("storageVersionHash of %s = %q, want %q", key, hashes[key], want)
		}
	}
	if hashes["events.k8s.io/v1/events"] != hashes["v1/events"] {
		t.Errorf("events.k8s.io events are stored as core events: hash %q, want %q", hashes["events.k8s.io/v1/events"], hashes["v1/events"])
	}
}

func TestProtobuf(t *testing.T) {
	d := newDiscovery(t)
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	if err := apidiscoveryv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pb := protobuf.NewSerializer(scheme, scheme)

	resp, _ := d.Serve("/apis/apps/v1", "application/vnd.kubernetes.protobuf")
	if resp.ContentType != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("content type %s", resp.ContentType)
	}
	obj, _, err := pb.Decode(resp.Body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, ok := obj.(*metav1.APIResourceList)
	if !ok || list.GroupVersion != "apps/v1" || len(list.APIResources) == 0 {
		t.Fatalf("decoded %T %+v", obj, obj)
	}

	resp, _ = d.Serve("/apis", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	obj, _, err = pb.Decode(resp.Body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	agg, ok := obj.(*apidiscoveryv2.APIGroupDiscoveryList)
	if !ok || len(agg.Items) == 0 || agg.Items[0].Name != "apps" {
		t.Fatalf("decoded %T", obj)
	}
}

func TestETag(t *testing.T) {
	d := newDiscovery(t)
	const v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
	resp, _ := d.Serve("/apis", v2)
	if !strings.HasPrefix(resp.ETag, `"`) || !resp.NotModified(resp.ETag) || resp.NotModified(`"other"`) {
		t.Errorf("etag %q", resp.ETag)
	}
	plain, _ := d.Serve("/apis", "")
	if plain.ETag != "" || plain.NotModified("") {
		t.Errorf("plain discovery carries etag %q", plain.ETag)
	}
}

func TestUnknownSubresource(t *testing.T) {
	s, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(s, []registry.Resource{
		{Version: "v1", Resource: "pods", Kind: "Pod", Singular: "pod", Namespaced: true, Subresources: []string{"frobnicate"}, Prefix: "/registry/pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewVersion("v1.37.2", "")
	if _, err := New(reg, v); err == nil {
		t.Error("New accepted an unknown subresource")
	}
}

func BenchmarkServe(b *testing.B) {
	reg, _ := registry.NewBuiltin()
	v, _ := NewVersion("v1.37.2", "")
	d, err := New(reg, v)
	if err != nil {
		b.Fatal(err)
	}
	const v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
	b.ReportAllocs()
	for b.Loop() {
		if resp, ok := d.Serve("/apis", v2); !ok || resp.Status != 200 {
			b.Fatal("not served")
		}
	}
}
