package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/health"
	"github.com/kgate/kgate/cachenode/natsauth"
	"github.com/kgate/kgate/cachenode/natsmetrics"
	"github.com/kgate/kgate/deploy/pki"
	"github.com/kgate/kgate/deploy/role"
	"github.com/kgate/kgate/gateway"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/encryption"
	"github.com/kgate/kgate/storage/ipalloc"
	"github.com/kgate/kgate/storage/ranges"
)

// backendFlags are the flags both production roles take.
type backendFlags struct {
	etcdServers *string
	natsURL     *string
	log         logFlags
	splits      *string
	nodeName    *string
	gossipBind  *string
	advertise   *string
	join        *string
	internal    internalFlags
	encryption  *string
	mediaType   *string
}

func addBackendFlags(fs *flag.FlagSet) backendFlags {
	return backendFlags{
		etcdServers: fs.String("etcd-servers", "http://127.0.0.1:2379", "comma-separated etcd client URLs"),
		natsURL:     fs.String("nats-url", nats.DefaultURL, "NATS server URL(s), comma-separated"),
		log:         addLogFlags(fs),
		splits: fs.String("range-splits", ranges.DefaultSplits().String(),
			"split points of ranges (every gateway and cache node must use the same), e.g. \"pods=g,n,t;events=g,n,t\"; empty for one range per resource"),
		nodeName:   fs.String("node-name", "", "member name in the cluster (cache nodes: stable, e.g. the pod name); default hostname and a random suffix"),
		gossipBind: fs.String("cluster-bind-address", "0.0.0.0:7946", "gossip address (UDP and TCP) of the membership"),
		advertise:  fs.String("cluster-advertise-address", "", "address other members reach this one at (default: derived)"),
		join:       fs.String("join", "", "members to join, comma-separated host:port (or a headless Service name)"),
		internal:   addInternalFlags(fs),
		encryption: fs.String("encryption-provider-config", "", "kube-apiserver's EncryptionConfiguration file: how values of each resource are encrypted in etcd (every gateway and cache node must use the same)"),
		mediaType: fs.String("storage-media-type", backend.DefaultMediaType,
			"how built-in objects are stored in etcd: application/vnd.kubernetes.protobuf (kube-apiserver's) or application/json; custom resources are always JSON"),
	}
}

func (f backendFlags) membership(p *internalPlane) role.Membership {
	m := role.Membership{Name: *f.nodeName, Bind: *f.gossipBind, Advertise: *f.advertise, Keys: p.gossipKeys}
	if *f.join != "" {
		m.Join = strings.Split(*f.join, ",")
	}
	return m
}

// backends are the connections and the storage stack a role runs on.
type backends struct {
	log     *slog.Logger
	etcd    *clientv3.Client
	nats    *nats.Conn
	storage *backend.Backend
	prom    *prometheus.Registry
	plane   *internalPlane
}

// connect connects to etcd and NATS and opens the storage stack, in that
// order, as role (pki.RoleGateway or pki.RoleCacheNode) on the internal
// plane; close undoes it in reverse.
func (f backendFlags) connect(name, role, serviceCIDR string, tune ...func(*backend.Config)) (_ *backends, err error) {
	log, err := f.log.logger()
	if err != nil {
		return nil, err
	}
	splits, err := ranges.ParseSplits(*f.splits)
	if err != nil {
		return nil, fmt.Errorf("cannot parse --range-splits: %w", err)
	}
	plane, err := f.internal.resolve(role, log)
	if err != nil {
		return nil, err
	}
	b := &backends{log: log, prom: prometheus.NewRegistry(), plane: plane}
	b.prom.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	t0 := time.Now()
	if b.etcd, err = clientv3.New(clientv3.Config{
		Endpoints: strings.Split(*f.etcdServers, ","), DialTimeout: 10 * time.Second, Logger: zap.NewNop(), TLS: plane.etcdTLS,
		// A member that stopped answering (cut off, frozen) is dropped
		// from the balancer within seconds. etcd refuses pings closer than
		// 5s apart (GOAWAY too_many_pings), so 10s leaves a margin.
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 5 * time.Second,
	}); err != nil {
		return nil, fmt.Errorf("cannot connect to etcd: %w", err)
	}
	log.Info("etcd client ready", "took", time.Since(t0))
	t0 = time.Now()
	// A server that stops answering (cut off, frozen) is left after two
	// unanswered pings 5s apart, not the library's 2 minutes: until then
	// no change reaches this member.
	nm, err := natsmetrics.New(b.prom, log.With("component", "nats"))
	if err != nil {
		return nil, err
	}
	opts := append(append([]nats.Option{}, plane.natsOpts...), nm.Options()...)
	if b.nats, err = nats.Connect(*f.natsURL, append(opts, nats.Name(name), nats.MaxReconnects(-1),
		nats.PingInterval(5*time.Second), nats.MaxPingsOutstanding(2))...); err != nil {
		return nil, fmt.Errorf("cannot connect to NATS: %w", err)
	}
	nm.Attach(b.nats)
	log.Info("NATS connected", "took", time.Since(t0))
	t0 = time.Now()
	bcfg := backend.Config{Etcd: b.etcd, Splits: splits, ServiceCIDR: serviceCIDR, MediaType: *f.mediaType, Metrics: b.prom, Logger: log}
	if *f.encryption != "" {
		if bcfg.Transformers, err = encryption.Load(context.Background(), *f.encryption); err != nil {
			return nil, err
		}
	}
	for _, t := range tune {
		t(&bcfg)
	}
	if b.storage, err = backend.Open(bcfg); err != nil {
		return nil, err
	}
	log.Info("storage opened", "took", time.Since(t0))
	return b, nil
}

// close closes what connect opened, in reverse order.
func (b *backends) close() {
	if b.storage != nil {
		b.storage.Close()
	}
	if b.nats != nil {
		b.nats.Close()
	}
	if b.etcd != nil {
		b.etcd.Close()
	}
}

func runGateway(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kgate gateway", flag.ContinueOnError)
	bf := addBackendFlags(fs)
	bind := fs.String("bind-address", "0.0.0.0", "address to serve HTTPS on")
	port := fs.Int("secure-port", 6443, "port to serve HTTPS on")
	advertise := fs.String("advertise-address", "", "IP cluster members reach this gateway at: the kubernetes Service's endpoint (default: --bind-address, or the host's default interface when that is 0.0.0.0)")
	certFile := fs.String("tls-cert-file", "", "serving certificate (PEM); required")
	keyFile := fs.String("tls-private-key-file", "", "serving key (PEM); required")
	clientCA := fs.String("client-ca-file", "", "CA bundle verifying client certificates")
	tokenFile := fs.String("token-auth-file", "", "kube-apiserver static token file")
	anonymous := fs.Bool("anonymous-auth", false, "admit requests without credentials as system:anonymous")
	cacheAddrs := fs.String("cachenode", "", "fixed cache node read API addresses (host:port, comma-separated, best first) instead of learning them from the cluster")
	serviceCIDR := fs.String("service-cluster-ip-range", ipalloc.DefaultCIDR, "CIDR Service cluster IPs are allocated from")
	fallback := fs.String("consistent-read-fallback", "reject", "when the cache cannot catch up with etcd for a consistent read: reject (429) or etcd")
	uf := addUpkeepFlags(fs)
	profiling := fs.Bool("profiling", true, "serve Go's profiles at /debug/pprof/ to whom RBAC allows those URLs (cluster-admin), as kube-apiserver's --profiling")
	shutdownDelay := fs.Duration("shutdown-delay-duration", 0, "after SIGTERM, keep serving this long with /readyz failing before the server stops accepting, so load balancers move new connections first")
	af := addAuthFlags(fs, false)
	of := addOpsFlags(fs)
	kf := addKubeletFlags(fs)
	gf := addAggregatorFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *certFile == "" || *keyFile == "" {
		return errors.New("--tls-cert-file and --tls-private-key-file are required")
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("cannot load serving certificate: %w", err)
	}
	b, err := bf.connect("kgate-gateway", pki.RoleGateway, *serviceCIDR, uf.backend)
	if err != nil {
		return err
	}
	defer b.close()
	cfg := gateway.Config{
		Listen: net.JoinHostPort(*bind, strconv.Itoa(*port)), AdvertiseAddress: *advertise,
		TLS: &tls.Config{
			Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert,
			MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
		},
		Auth:  gateway.AuthConfig{ClientCAFile: *clientCA, TokenAuthFile: *tokenFile, AnonymousAuth: *anonymous},
		Build: version, ConsistentReadFallback: *fallback, CacheNodeTLS: b.plane.readClient(), ShutdownDelay: *shutdownDelay,
		Profiling: *profiling,
	}
	deps := gateway.Deps{Backend: b.storage, NATS: b.nats, Logger: b.log.With("component", "gateway"), Metrics: b.prom, Gatherer: b.prom}
	af.gateway(&cfg)
	of.gateway(&cfg, *certFile, *keyFile)
	kf.gateway(&cfg)
	gf.gateway(&cfg)
	if s := cfg.Audit.NATSSubject; s != "" && b.plane.role != nil && !natsauth.AuditAllowed(s) {
		return fmt.Errorf("--audit-nats-subject %q: gateways may publish audit events only on %s and below it", s, natsauth.AuditSubject)
	}
	if *cacheAddrs != "" {
		cfg.CacheNodes = strings.Split(*cacheAddrs, ",")
		gw, err := gateway.New(cfg, deps)
		if err != nil {
			return err
		}
		return gw.Run(ctx)
	}
	gw, err := role.NewGateway(role.GatewayConfig{Gateway: cfg, Deps: deps, Membership: bf.membership(b.plane), Logger: b.log, Metrics: b.prom})
	if err != nil {
		return err
	}
	return gw.Run(ctx)
}

func runCachenode(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kgate cachenode", flag.ContinueOnError)
	bf := addBackendFlags(fs)
	listen := fs.String("listen", "0.0.0.0:7443", "address of the internal read API")
	metricsAddr := fs.String("metrics-address", "0.0.0.0:7444", "address serving /metrics, /livez and /readyz")
	replicas := fs.Int("replicas", 2, "cache nodes owning each range (the same on every node)")
	window := addWindowFlags(fs)
	stallAfter := fs.Duration("watch-stall-timeout", 30*time.Second, "a range whose etcd watch brings nothing (no event, no progress notification) for this long is stalled: /readyz fails on it and its watch starts again")
	gcPercent := fs.Int("gc-percent", defaultCachenodeGCPercent, "the garbage collector's target (GOGC) unless GOGC is set: the heap may grow this many percent past what is live before a collection; -1: off, GOMEMLIMIT alone bounds the heap")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := setGCPercent(*gcPercent); err != nil {
		return err
	}
	b, err := bf.connect("kgate-cachenode", pki.RoleCacheNode, "")
	if err != nil {
		return err
	}
	defer b.close()
	c, err := role.NewCacheNode(role.CacheNodeConfig{
		Node: cachenode.Config{
			Etcd: b.etcd, NATS: b.nats, Registry: b.storage.Registry, Codec: b.storage.Codec, Ranges: b.storage.Ranges,
			Listen: *listen, TLS: b.plane.readServer(), Logger: b.log.With("component", "cachenode"), Metrics: b.prom,
			Window: *window, StallAfter: *stallAfter, Transformers: b.storage.Transformers,
		},
		Membership: bf.membership(b.plane), Replicas: *replicas, Logger: b.log, Metrics: b.prom,
	})
	if err != nil {
		return err
	}
	hs, err := health.New(health.Config{Listen: *metricsAddr, Ready: c.Node.Ready, Checks: c.Node.Checks, Gatherer: b.prom})
	if err != nil {
		c.Close()
		return err
	}
	return role.RunAll(ctx, map[string]func(context.Context) error{"cache node": c.Run, "health": hs.Run})
}
