package aggregator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// DialFunc dials the backend (with the address checks of the caller).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Transport returns the round tripper to an APIService's backend as
// kube-aggregator's proxy handler builds it (updateAPIService) with
// client-go's transport.New: TLS verified with spec.caBundle, or not at
// all with spec.insecureSkipTLSVerify; the server name
// <service>.<namespace>.svc; the front-proxy client certificate
// (--proxy-client-cert-file/--proxy-client-key-file, PEM) presented;
// connections made by dial, never through an environment proxy.
func Transport(s *apiregistrationv1.APIService, certPEM, keyPEM []byte, dial DialFunc) (http.RoundTripper, error) {
	if s.Spec.Service == nil {
		return nil, fmt.Errorf("cannot build the transport of APIService %s: it is local", s.Name)
	}
	if dial == nil {
		return nil, errors.New("cannot build the transport of APIService " + s.Name + ": no dialer")
	}
	cfg := &transport.Config{
		TLS: transport.TLSConfig{
			Insecure:   s.Spec.InsecureSkipTLSVerify,
			ServerName: s.Spec.Service.Name + "." + s.Spec.Service.Namespace + ".svc",
			CertData:   certPEM,
			KeyData:    keyPEM,
			CAData:     s.Spec.CABundle,
		},
		DialHolder: &transport.DialHolder{Dial: dial},
		Proxy:      func(*http.Request) (*url.URL, error) { return nil, nil },
	}
	rt, err := transport.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot build the transport of APIService %s: %w", s.Name, err)
	}
	return rt, nil
}
