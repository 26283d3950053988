package requestinfo

import (
	"net/url"
	"reflect"
	"testing"
)

// FuzzParse compares Parse with kube-apiserver's RequestInfoFactory on
// random methods, paths and queries.
func FuzzParse(f *testing.F) {
	seeds := []struct{ method, path, query string }{
		{"GET", "/api/v1/namespaces/ns/pods", "watch=1"},
		{"GET", "/api/v1/namespaces/ns/pods", "fieldSelector=metadata.name%3Dfoo&labelSelector=a%3Db&limit=5"},
		{"GET", "/api/v1/namespaces/ns", ""},
		{"PUT", "/api/v1/namespaces/ns/finalize", ""},
		{"GET", "/api/v1/watch/namespaces/ns/pods/p", ""},
		{"GET", "/api/v1/proxy/nodes/n/x/y", ""},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments", "fieldSelector=metadata.name=x"},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", ""},
		{"HEAD", "//apis//apps/v1/", "watch=FALSE"},
		{"get", "/openapi/v3/apis/apps/v1", "timeoutSeconds=x&watch"},
		{"GET", "/api/v1/pods", "fieldSelector=metadata.name%3D%3Da%5C%2Cb,x!%3Dy&timeoutSeconds=1"},
		{"GET", "/api/v1/a/b/c/d/e/f/g/h/i/j/k/l", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query)
	}
	fac := upstreamFactory()
	f.Fuzz(func(t *testing.T, method, path, rawQuery string) {
		up, upErr := upstream(t, fac, method, path, rawQuery)
		var got Info
		err := Parse(&got, method, path, values(parseQuery(rawQuery)))
		if (err != nil) != (upErr != nil) {
			t.Fatalf("%s %q ?%q: error %v, upstream %v", method, path, rawQuery, err, upErr)
		}
		if !reflect.DeepEqual(public(got), up) {
			t.Fatalf("%s %q ?%q:\ngot      %#v\nupstream %#v", method, path, rawQuery, public(got), up)
		}
		var gb Info
		_ = ParseBytes(&gb, []byte(method), []byte(path), values(parseQuery(rawQuery)))
		if !reflect.DeepEqual(public(gb), public(got)) {
			t.Fatalf("ParseBytes %s %q ?%q:\ngot  %#v\nwant %#v", method, path, rawQuery, public(gb), public(got))
		}
	})
}

// parseQuery is what (*url.URL).Query does: malformed pairs are dropped.
func parseQuery(raw string) url.Values {
	v, _ := url.ParseQuery(raw)
	return v
}
