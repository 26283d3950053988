// Package proxyheader says which of a client's request headers a proxy of
// the gateway (the kubelet proxies, the aggregation proxy) may pass on to
// its backend: never the client's credentials or a claimed identity.
package proxyheader

import "strings"

// Forwardable says whether a request header may reach the backend. The
// client's credentials stay at the gateway, as kube-apiserver's
// authentication and impersonation filters remove them before its
// proxies run: Authorization (and Proxy-Authorization), the
// Impersonate-* headers, and any X-Remote-* identity header (the
// request-header authenticator's names), which a client could send to
// claim an identity the backend trusts. Names are matched
// case-insensitively.
func Forwardable(name string) bool {
	// Underscores count as dashes: some proxies and servers treat them
	// alike.
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "_", "-")
	switch {
	case n == "authorization", n == "proxy-authorization":
		return false
	case strings.HasPrefix(n, "impersonate-"):
		return false
	case strings.HasPrefix(n, "x-remote-"):
		return false
	}
	return true
}

// Safe refuses a header name or value with a control character (CR, LF,
// NUL, ...) other than a tab: written again into a request it could end
// the header early or add another one.
func Safe(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
