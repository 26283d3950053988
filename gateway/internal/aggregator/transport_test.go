package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kgate/kgate/gateway/internal/aggregator/aggregatortest"
)

// TestTransport: the backend's certificate is verified with caBundle for
// the name <service>.<namespace>.svc (or not at all when insecure), and
// the backend sees the front-proxy client certificate.
func TestTransport(t *testing.T) {
	serving, other, front := aggregatortest.NewCA(t, "serving-ca"), aggregatortest.NewCA(t, "other-ca"), aggregatortest.NewCA(t, "front-proxy-ca")
	serverCert, serverKey := serving.Issue(t, "api", "api.ext.svc")
	clientCert, clientKey := front.Issue(t, "front-proxy-client")
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(front.PEM)
	seen := make(chan string, 8)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			seen <- r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.WriteHeader(http.StatusOK)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	// Whatever the URL names, the connection goes to the test server,
	// as a resolved endpoint would.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	f := func(name string, spec apiregistrationv1.APIServiceSpec, client []byte, wantOK bool) {
		t.Run(name, func(t *testing.T) {
			s := &apiregistrationv1.APIService{Spec: spec}
			s.Name = "v1.example.com"
			rt, err := Transport(s, client, clientKey, dial)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://10.96.0.10:443/apis/example.com/v1", nil)
			resp, err := rt.RoundTrip(req)
			if !wantOK {
				if err == nil {
					resp.Body.Close()
					t.Fatal("the backend was reached")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if cn := <-seen; cn != "front-proxy-client" {
				t.Errorf("backend saw client certificate %q", cn)
			}
		})
	}
	svc := &apiregistrationv1.ServiceReference{Namespace: "ext", Name: "api"}
	wrongName := &apiregistrationv1.ServiceReference{Namespace: "ext", Name: "other"}
	f("caBundle", apiregistrationv1.APIServiceSpec{Service: svc, CABundle: serving.PEM}, clientCert, true)
	f("another CA", apiregistrationv1.APIServiceSpec{Service: svc, CABundle: other.PEM}, clientCert, false)
	f("another service name", apiregistrationv1.APIServiceSpec{Service: wrongName, CABundle: serving.PEM}, clientCert, false)
	f("insecure", apiregistrationv1.APIServiceSpec{Service: svc, InsecureSkipTLSVerify: true}, clientCert, true)
	if _, err := Transport(&apiregistrationv1.APIService{}, clientCert, clientKey, dial); err == nil {
		t.Error("a transport for a local APIService")
	}
}
