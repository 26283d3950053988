package main

import (
	"flag"

	"github.com/kgate/kgate/deploy/devcluster"
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
