package requestinfo

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
)

// values adapts url.Values (as net/http parses a query) to Query.
type values url.Values

func (v values) Peek(k string) []byte {
	if vs := v[k]; len(vs) > 0 {
		return []byte(vs[0])
	}
	return nil
}

func (v values) Has(k string) bool { return len(v[k]) > 0 }

func TestMain(m *testing.M) {
	// upstream logs every query it cannot decode
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

func upstreamFactory() *request.RequestInfoFactory {
	return &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	}
}

// upstream parses with kube-apiserver's RequestInfoFactory.
func upstream(t testing.TB, f *request.RequestInfoFactory, method, path, rawQuery string) (Info, error) {
	t.Helper()
	req := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: rawQuery}}
	ri, err := f.NewRequestInfo(req)
	if ri == nil {
		t.Fatalf("upstream returned nil info for %s %q?%q", method, path, rawQuery)
	}
	return Info{
		IsResourceRequest: ri.IsResourceRequest, Path: ri.Path, Verb: ri.Verb,
		APIPrefix: ri.APIPrefix, APIGroup: ri.APIGroup, APIVersion: ri.APIVersion,
		Namespace: ri.Namespace, Resource: ri.Resource, Subresource: ri.Subresource,
		Name: ri.Name, Parts: ri.Parts,
	}, err
}

// public drops the inline storage so Infos compare by their fields.
func public(i Info) Info {
	i.parts = [inlineParts]string{}
	return i
}

func TestParse(t *testing.T) {
	type want struct {
		res                            bool
		verb, prefix, group, version   string
		namespace, resource, sub, name string
	}
	r := func(verb, prefix, group, version, ns, resource, sub, name string) want {
		return want{true, verb, prefix, group, version, ns, resource, sub, name}
	}
	nr := func(verb string) want { return want{verb: verb} }
	tests := []struct {
		method, url string
		want        want
		err         error
	}{
		// core group, namespaced
		{"GET", "/api/v1/namespaces/ns/pods", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", r("watch", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=1", r("watch", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=0", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=false", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=FaLsE", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=", r("watch", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch", r("watch", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=yes&watch=0", r("watch", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=1&limit=x", r("watch", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods/p", r("get", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"HEAD", "/api/v1/namespaces/ns/pods/p", r("get", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"GET", "/api/v1/namespaces/ns/pods/p?watch=1", r("get", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"GET", "/api/v1/namespaces/ns/pods/p/status", r("get", "api", "", "v1", "ns", "pods", "status", "p"), nil},
		{"GET", "/api/v1/namespaces/ns/pods/p/log?follow=true", r("get", "api", "", "v1", "ns", "pods", "log", "p"), nil},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", r("update", "api", "", "v1", "ns", "pods", "status", "p"), nil},
		{"PATCH", "/api/v1/namespaces/ns/pods/p", r("patch", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"POST", "/api/v1/namespaces/ns/pods", r("create", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"POST", "/api/v1/namespaces/ns/pods/p/binding", r("create", "api", "", "v1", "ns", "pods", "binding", "p"), nil},
		{"POST", "/api/v1/namespaces/ns/pods/p/eviction", r("create", "api", "", "v1", "ns", "pods", "eviction", "p"), nil},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", r("delete", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"DELETE", "/api/v1/namespaces/ns/pods", r("deletecollection", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"DELETE", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp", r("deletecollection", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"OPTIONS", "/api/v1/namespaces/ns/pods", r("", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"get", "/api/v1/namespaces/ns/pods/p", r("", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"GET", "/api/v1/pods", r("list", "api", "", "v1", "", "pods", "", ""), nil},
		{"GET", "/api/v1/pods/", r("list", "api", "", "v1", "", "pods", "", ""), nil},
		{"GET", "//api/v1/pods//", r("list", "api", "", "v1", "", "pods", "", ""), nil},
		{"GET", "/api/v1//pods", r("get", "api", "", "v1", "", "", "", "pods"), nil},

		// namespaces: the object, its subresources, and scope
		{"GET", "/api/v1/namespaces", r("list", "api", "", "v1", "", "namespaces", "", ""), nil},
		{"GET", "/api/v1/namespaces?watch=1", r("watch", "api", "", "v1", "", "namespaces", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns", r("get", "api", "", "v1", "ns", "namespaces", "", "ns"), nil},
		{"DELETE", "/api/v1/namespaces/ns", r("delete", "api", "", "v1", "ns", "namespaces", "", "ns"), nil},
		{"GET", "/api/v1/namespaces/ns/status", r("get", "api", "", "v1", "ns", "namespaces", "status", "ns"), nil},
		{"PUT", "/api/v1/namespaces/ns/finalize", r("update", "api", "", "v1", "ns", "namespaces", "finalize", "ns"), nil},
		{"GET", "/api/v1/namespaces/ns/status/x", r("get", "api", "", "v1", "ns", "namespaces", "status", "ns"), nil},

		// named groups
		{"GET", "/apis/apps/v1/deployments?watch=1", r("watch", "apis", "apps", "v1", "", "deployments", "", ""), nil},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments/d", r("get", "apis", "apps", "v1", "ns", "deployments", "", "d"), nil},
		{"PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", r("update", "apis", "apps", "v1", "ns", "deployments", "scale", "d"), nil},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", r("get", "apis", "rbac.authorization.k8s.io", "v1", "", "clusterroles", "", "admin"), nil},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", r("create", "apis", "authorization.k8s.io", "v1", "", "selfsubjectaccessreviews", "", ""), nil},

		// legacy verb in path
		{"GET", "/api/v1/watch/pods", r("watch", "api", "", "v1", "", "pods", "", ""), nil},
		{"GET", "/api/v1/watch/namespaces/ns/pods", r("watch", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/watch/namespaces/ns/pods/p", r("watch", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"GET", "/api/v1/watch/namespaces/ns", r("watch", "api", "", "v1", "ns", "namespaces", "", "ns"), nil},
		{"GET", "/apis/apps/v1/watch/namespaces/ns/deployments", r("watch", "apis", "apps", "v1", "ns", "deployments", "", ""), nil},
		{"GET", "/api/v1/proxy/namespaces/ns/pods/p/a/b", r("proxy", "api", "", "v1", "ns", "pods", "", "p"), nil},
		{"GET", "/api/v1/watch", r("get", "api", "", "v1", "", "", "", ""), ErrNoResource},
		{"GET", "/api/v1/proxy", r("get", "api", "", "v1", "", "", "", ""), ErrNoResource},

		// proxy subresources and long paths
		{"GET", "/api/v1/nodes/n1/proxy/metrics", r("get", "api", "", "v1", "", "nodes", "proxy", "n1"), nil},
		{"GET", "/api/v1/namespaces/ns/services/s:80/proxy/a/b/c/d/e/f/g/h", r("get", "api", "", "v1", "ns", "services", "proxy", "s:80"), nil},

		// fieldSelector metadata.name
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo", r("list", "api", "", "v1", "ns", "pods", "", "foo"), nil},
		{"GET", "/api/v1/namespaces/ns/pods?watch=1&fieldSelector=metadata.name%3D%3Dfoo", r("watch", "api", "", "v1", "ns", "pods", "", "foo"), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo,spec.nodeName%3Dn", r("list", "api", "", "v1", "ns", "pods", "", "foo"), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name!%3Dfoo", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Da%2Fb", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3D..", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo&limit=x", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo&limit=", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo&limit=500&timeoutSeconds=30", r("list", "api", "", "v1", "ns", "pods", "", "foo"), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo&labelSelector=a%3D%3D%3D", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo&labelSelector=app%3Dx", r("list", "api", "", "v1", "ns", "pods", "", "foo"), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Df%5C%2Co", r("list", "api", "", "v1", "ns", "pods", "", "f,o"), nil},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name", r("list", "api", "", "v1", "ns", "pods", "", ""), nil},

		// non-resource URLs
		{"GET", "/", nr("get"), nil},
		{"GET", "", nr("get"), nil},
		{"GET", "/api", nr("get"), nil},
		{"GET", "/api/v1", nr("get"), nil},
		{"GET", "/apis/apps/v1/", want{verb: "get", prefix: "apis"}, nil},
		{"GET", "/apis", nr("get"), nil},
		{"GET", "/apis/apps", nr("get"), nil},
		{"GET", "/apis/apps/v1", want{verb: "get", prefix: "apis"}, nil},
		{"GET", "/version", nr("get"), nil},
		{"GET", "/healthz", nr("get"), nil},
		{"GET", "/livez?verbose", nr("get"), nil},
		{"GET", "/openapi/v2", nr("get"), nil},
		{"GET", "/openapi/v3/apis/apps/v1", nr("get"), nil},
		{"GET", "/metrics", nr("get"), nil},
		{"POST", "/version", nr("post"), nil},
		{"PROPFIND", "/x/y/z", nr("propfind"), nil},
	}
	f := upstreamFactory()
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			path, rawQuery, _ := strings.Cut(tt.url, "?")
			q, err := url.ParseQuery(rawQuery)
			if err != nil {
				t.Fatal(err)
			}
			var got Info
			err = Parse(&got, tt.method, path, values(q))
			if !errors.Is(err, tt.err) {
				t.Fatalf("error = %v, want %v", err, tt.err)
			}
			w := tt.want
			want := want{got.IsResourceRequest, got.Verb, got.APIPrefix, got.APIGroup, got.APIVersion,
				got.Namespace, got.Resource, got.Subresource, got.Name}
			if want != w {
				t.Errorf("got  %+v\nwant %+v", want, w)
			}

			up, upErr := upstream(t, f, tt.method, path, rawQuery)
			if (upErr != nil) != (err != nil) {
				t.Errorf("error = %v, upstream %v", err, upErr)
			}
			if !reflect.DeepEqual(public(got), up) {
				t.Errorf("differs from upstream:\ngot      %#v\nupstream %#v", public(got), up)
			}

			// the fasthttp form gives the same answer
			var args fasthttp.Args
			args.Parse(rawQuery)
			var fb Info
			errB := ParseBytes(&fb, []byte(tt.method), []byte(path), &args)
			if !errors.Is(errB, tt.err) || !reflect.DeepEqual(public(fb), public(got)) {
				t.Errorf("ParseBytes with fasthttp.Args differs:\ngot  %#v\nwant %#v", public(fb), public(got))
			}
		})
	}
}

func TestParseNilQuery(t *testing.T) {
	var got Info
	if err := Parse(&got, "GET", "/api/v1/pods", nil); err != nil {
		t.Fatal(err)
	}
	if got.Verb != "list" || got.Resource != "pods" {
		t.Fatalf("got %+v", got)
	}
}

func TestParseReusesInfo(t *testing.T) {
	var got Info
	if err := Parse(&got, "GET", "/api/v1/namespaces/ns/pods/p/status", nil); err != nil {
		t.Fatal(err)
	}
	if err := Parse(&got, "GET", "/version", nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(public(got), Info{Path: "/version", Verb: "get"}) {
		t.Fatalf("stale fields after reuse: %#v", public(got))
	}
}
