package requestinfo

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func BenchmarkParseBytes(b *testing.B) {
	cases := []struct{ name, method, path, query string }{
		{"get", "GET", "/api/v1/namespaces/default/pods/nginx-7c5ddbdf54-x2x9z", ""},
		{"list", "GET", "/apis/apps/v1/namespaces/default/deployments", "limit=500&labelSelector=app%3Dweb"},
		{"watch", "GET", "/api/v1/pods", "watch=1&resourceVersion=123&allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dnode-1"},
		{"status", "PUT", "/api/v1/namespaces/default/pods/nginx/status", ""},
		{"nonresource", "GET", "/openapi/v3/apis/apps/v1", ""},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var args fasthttp.Args
			args.Parse(c.query)
			method, path := []byte(c.method), []byte(c.path)
			var info Info
			b.ReportAllocs()
			for b.Loop() {
				if err := ParseBytes(&info, method, path, &args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	var args fasthttp.Args
	args.Parse("watch=1&resourceVersion=123")
	var info Info
	b.ReportAllocs()
	for b.Loop() {
		if err := Parse(&info, "GET", "/api/v1/namespaces/default/pods", &args); err != nil {
			b.Fatal(err)
		}
	}
}
