// Package aggregator holds the parts of the gateway's APIService
// aggregation proxy, each as kube-aggregator does it: where an
// APIService's requests go (Resolver: cluster IP or, with
// --enable-aggregator-routing, an EndpointSlice endpoint, through
// k8s.io/apiserver's resolvers; loopback and link-local refused unless
// allowed), how they get there (Transport: TLS verified with caBundle,
// the front-proxy client certificate, client-go's transport) and what
// they carry (Outbound: the client's headers without its credentials,
// the user in X-Remote-*), Proxy, upstream's proxy handler as a
// net/http handler putting them together (503 while not Available or
// unresolvable, upgrades and streams spliced by apimachinery's
// UpgradeAwareHandler, errors as metav1.Status), and Dispatch, the
// gateway's step that serves those requests with Proxy on the hijacked
// connection, over a feed of APIServices. The Available condition it
// reads is gateway/internal/availability's.
package aggregator

import (
	"net/http"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/transport"

	"github.com/kgate/kgate/gateway/internal/proxyheader"
)

// Outbound returns the request header an extension server receives for
// a request of u (the user after impersonation) whose client sent in:
// in's forwardable headers (proxyheader.Forwardable: never the client's
// Authorization, impersonation or X-Remote-* headers; names and values
// with control characters dropped), then u's identity as kube-aggregator
// sets it, with client-go's transport.SetAuthProxyHeaders: X-Remote-User,
// X-Remote-Uid (when sendUID, upstream's RemoteRequestHeaderUID gate),
// X-Remote-Group and X-Remote-Extra-<key> (key escaped as upstream).
// The extension server trusts these headers only from a connection
// presenting the front-proxy client certificate.
func Outbound(in http.Header, u user.Info, sendUID bool) http.Header {
	out := make(http.Header, len(in)+3)
	for name, values := range in {
		if !proxyheader.Forwardable(name) || !proxyheader.Safe([]byte(name)) {
			continue
		}
		for _, v := range values {
			if proxyheader.Safe([]byte(v)) {
				out[name] = append(out[name], v)
			}
		}
	}
	uid := ""
	if sendUID {
		uid = u.GetUID()
	}
	transport.SetAuthProxyHeaders(&http.Request{Header: out}, u.GetName(), uid, u.GetGroups(), u.GetExtra())
	return out
}
