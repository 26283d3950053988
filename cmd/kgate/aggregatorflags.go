package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/gateway"
)

// aggregatorFlags are kube-apiserver's flags of the proxy to extension
// API servers (non-local APIServices), taken by `kgate gateway` and
// `kgate dev`.
type aggregatorFlags struct{ cfg gateway.AggregatorConfig }

func addAggregatorFlags(fs *flag.FlagSet) *aggregatorFlags {
	a := &aggregatorFlags{}
	c := &a.cfg
	fs.StringVar(&c.ProxyClientCertFile, "proxy-client-cert-file", "", "front-proxy client certificate presented to extension API servers")
	fs.StringVar(&c.ProxyClientKeyFile, "proxy-client-key-file", "", "key of --proxy-client-cert-file")
	fs.BoolVar(&c.EnableAggregatorRouting, "enable-aggregator-routing", false, "proxy to an endpoint of an APIService's Service (its EndpointSlices) instead of its cluster IP")
	fs.BoolVar(&c.AllowLoopback, "aggregator-allow-loopback-targets", false, "let the aggregator dial extension servers on loopback and link-local addresses (development, tests); off, they are refused")
	return a
}

func (a *aggregatorFlags) gateway(cfg *gateway.Config) { cfg.Aggregator = a.cfg }

func (a *aggregatorFlags) dev(cfg *devcluster.Config) { cfg.Aggregator = a.cfg }

// devFrontProxy gives `kgate dev` a front proxy, as kubeadm sets one up
// for kube-apiserver, so extension API servers (metrics-server, ...)
// work against it without further flags: a front-proxy CA and client
// certificate kept in <dataDir>/front-proxy, presented to extension
// servers and trusted for identity headers (X-Remote-User,
// X-Remote-Group, X-Remote-Extra-*) from front-proxy-client alone. Any
// front-proxy or request-header flag given leaves both sides as the
// flags say.
func (a *aggregatorFlags) devFrontProxy(dataDir string, rh *gateway.RequestHeaderConfig) error {
	if a.cfg.ProxyClientCertFile != "" || a.cfg.ProxyClientKeyFile != "" || rh.ClientCAFile != "" || len(rh.AllowedNames) > 0 ||
		len(rh.UsernameHeaders) > 0 || len(rh.UIDHeaders) > 0 || len(rh.GroupHeaders) > 0 || len(rh.ExtraHeaderPrefixes) > 0 {
		return nil
	}
	fp, err := pki.EnsureFrontProxy(filepath.Join(dataDir, "front-proxy"), time.Now())
	if err != nil {
		return fmt.Errorf("cannot make the front-proxy certificates: %w", err)
	}
	a.cfg.ProxyClientCertFile, a.cfg.ProxyClientKeyFile = fp.CertFile, fp.KeyFile
	*rh = gateway.RequestHeaderConfig{
		ClientCAFile: fp.CAFile, AllowedNames: []string{pki.FrontProxyClientName},
		UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
	}
	return nil
}
