package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/ranges"
)

func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kgate dev", flag.ContinueOnError)
	dataDir := fs.String("data-dir", ".kgate", "directory for etcd data, certificates and the kubeconfig (kept across restarts)")
	listen := fs.String("listen", "127.0.0.1:6443", "HTTPS address of the gateway")
	tokenFile := fs.String("token-auth-file", "", "kube-apiserver static token file (token,user,uid,\"group1,group2\")")
	anonymous := fs.Bool("anonymous-auth", false, "admit requests without credentials as system:anonymous")
	serviceCIDR := fs.String("service-cluster-ip-range", ipalloc.DefaultCIDR, "CIDR Service cluster IPs are allocated from")
	cacheNodes := fs.Int("cachenodes", 1, "cache nodes to run")
	gateways := fs.Int("gateways", 1, "gateways to run, on consecutive ports from --listen")
	replicas := fs.Int("replicas", 2, "cache nodes owning each range")
	splits := fs.String("range-splits", "", `split ranges, e.g. "pods=g,n,t;events=g,n,t" (default: none for one cache node, pods, events, leases and endpointslices in four for more)`)
	lf := addLogFlags(fs)
	profiling := fs.Bool("profiling", true, "serve Go's profiles at /debug/pprof/ on the gateways to whom RBAC allows those URLs (cluster-admin), as kube-apiserver's --profiling")
	insecureInternal := fs.Bool("insecure-internal", false, "run etcd, NATS, the cache nodes' read API and gossip in plaintext without credentials (default: mutual TLS, NATS credentials and an encrypted gossip, from certificates kept in <data-dir>/internal)")
	af := addAuthFlags(fs, true)
	of := addOpsFlags(fs)
	kf := addKubeletFlags(fs)
	gf := addAggregatorFlags(fs)
	window := addWindowFlags(fs)
	uf := addUpkeepFlags(fs)
	encryptionConfig := fs.String("encryption-provider-config", "", "kube-apiserver's EncryptionConfiguration file: how values of each resource are encrypted in etcd")
	mediaType := fs.String("storage-media-type", backend.DefaultMediaType, "how built-in objects are stored in etcd: application/vnd.kubernetes.protobuf (kube-apiserver's) or application/json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := lf.logger()
	if err != nil {
		return err
	}
	var split *ranges.Config
	if *splits != "" {
		cfg, err := ranges.ParseSplits(*splits)
		if err != nil {
			return fmt.Errorf("cannot parse --range-splits: %w", err)
		}
		split = &cfg
	}
	dcfg := devcluster.Config{
		CacheNodes: *cacheNodes, Gateways: *gateways, Replicas: *replicas, Splits: split,
		DataDir: *dataDir, Listen: *listen, TokenAuthFile: *tokenFile, AnonymousAuth: *anonymous,
		ServiceCIDR: *serviceCIDR, Build: version, Logger: log, Window: *window, InsecureInternal: *insecureInternal,
		Profiling: *profiling, EncryptionProviderConfig: *encryptionConfig, StorageMediaType: *mediaType,
	}
	dcfg.EtcdCompactionInterval, dcfg.EventTTL, dcfg.NodePortRange = *uf.compaction, *uf.eventTTL, *uf.nodePorts
	if err := gf.devFrontProxy(*dataDir, &af.requestHeader); err != nil {
		return err
	}
	af.dev(&dcfg)
	of.dev(&dcfg)
	kf.dev(&dcfg)
	gf.dev(&dcfg)
	c, err := devcluster.Start(ctx, dcfg)
	if err != nil {
		return err
	}
	for _, gw := range c.Gateways[1:] {
		fmt.Printf("also serving on https://%s\n", gw.Gateway.Addr())
	}
	fmt.Printf("\nkgate is serving on https://%s\n\n  kubeconfig: %s\n  try:        kubectl --kubeconfig %s get namespaces\n\n",
		c.Addr(), c.Kubeconfig(), c.Kubeconfig())
	select {
	case <-ctx.Done():
	case <-c.Done():
	}
	log.Info("shutting down")
	return c.Close()
}
