package authn

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkAuthenticateCert measures a request on a TLS connection whose
// client presented a certificate from the client CA (chain verified per
// request, as kube-apiserver does).
func BenchmarkAuthenticateCert(b *testing.B) {
	fx := newFixture(b)
	carol := fx.clientCA.issue(b, "carol", []string{"team1"}, x509.ExtKeyUsageClientAuth, nil)
	server := fx.servingCA.issue(b, "server", nil, x509.ExtKeyUsageServerAuth, nil)
	roots := x509.NewCertPool()
	roots.AddCert(fx.servingCA.cert)

	sc, cc := net.Pipe()
	srv := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.RequestClientCert})
	cli := tls.Client(cc, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{carol}})
	done := make(chan error, 1)
	go func() { done <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close(); _ = cli.Close() })

	var ctx fasthttp.RequestCtx
	ctx.Init2(srv, nil, false)
	ctx.Request.SetRequestURI("/api/v1/namespaces/default/pods")
	b.ReportAllocs()
	for b.Loop() {
		u, err := fx.strict.Authenticate(&ctx)
		if err != nil || u.GetName() != "carol" {
			b.Fatal(u, err)
		}
	}
}

// BenchmarkAuthenticateToken measures a bearer token from the token file.
func BenchmarkAuthenticateToken(b *testing.B) {
	fx := newFixture(b)
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/api/v1/namespaces/default/pods")
	b.ReportAllocs()
	for b.Loop() {
		// Authenticate removes the header on success.
		ctx.Request.Header.Set(fasthttp.HeaderAuthorization, "Bearer tok-alice")
		u, err := fx.strict.Authenticate(&ctx)
		if err != nil || u.GetName() != "alice" {
			b.Fatal(u, err)
		}
	}
}

// BenchmarkAuthenticateRejected measures a wrong token (the cost an
// attacker can make the gateway pay).
func BenchmarkAuthenticateRejected(b *testing.B) {
	fx := newFixture(b)
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/api/v1/namespaces/default/pods")
	ctx.Request.Header.Set(fasthttp.HeaderAuthorization, "Bearer tok-mallory")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fx.strict.Authenticate(&ctx); err == nil {
			b.Fatal("authenticated")
		}
	}
}

// BenchmarkAuthenticateProxy measures a front proxy's request: the
// proxy's chain is found in the cache of verified proxy chains, the user
// read from the identity headers, which are copied and stripped.
func BenchmarkAuthenticateProxy(b *testing.B) {
	fx := newFixture(b)
	proxyCA := newTestCA(b, "front-proxy-ca")
	a, err := New(Config{ClientCAFile: fx.caFile, RequestHeader: RequestHeaderConfig{
		ClientCAFile: writeFile(b, "proxy-ca.crt", pemOf(proxyCA.cert)), AllowedNames: []string{"front-proxy"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	proxy := proxyCA.issue(b, "front-proxy", nil, x509.ExtKeyUsageClientAuth, nil)
	server := fx.servingCA.issue(b, "server", nil, x509.ExtKeyUsageServerAuth, nil)
	roots := x509.NewCertPool()
	roots.AddCert(fx.servingCA.cert)
	sc, cc := net.Pipe()
	srv := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.RequestClientCert})
	cli := tls.Client(cc, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{proxy}})
	done := make(chan error, 1)
	go func() { done <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close(); _ = cli.Close() })

	var ctx fasthttp.RequestCtx
	ctx.Init2(srv, nil, false)
	ctx.Request.SetRequestURI("/api/v1/namespaces/default/pods")
	b.ReportAllocs()
	for b.Loop() {
		ctx.Request.Header.Set("X-Remote-User", "jane")
		ctx.Request.Header.Set("X-Remote-Group", "dev")
		u, err := a.Authenticate(&ctx)
		if err != nil || u.GetName() != "jane" {
			b.Fatal(u, err)
		}
	}
}
