package dockercluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// WaitReady waits until role's member i is ready, as seen from the host:
// an etcd member answers a status with a leader, a NATS server has
// routes to every other, a cache node's and a gateway's /readyz pass.
// It fails early when the container stops running.
func (c *Cluster) WaitReady(ctx context.Context, role string, i int) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	name := c.name(role, i)
	addr := c.HostAddr(role, i)
	if addr == "" {
		return fmt.Errorf("no member %s", name)
	}
	var check func(context.Context) error
	switch role {
	case Etcd:
		check = func(ctx context.Context) error { return c.etcdReady(ctx, addr) }
	case NATS:
		check = func(ctx context.Context) error { return natsReady(ctx, addr, c.cfg.NATS-1) }
	case CacheNode:
		check = func(ctx context.Context) error { return httpReady(ctx, http.DefaultClient, "http://"+addr+"/readyz") }
	case Gateway:
		hc, err := c.servingClient()
		if err != nil {
			return err
		}
		check = func(ctx context.Context) error { return httpReady(ctx, hc, "https://"+addr+"/readyz") }
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	t0 := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for n := 0; ; n++ {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			c.log.Debug("member ready", "member", name, "took", time.Since(t0).Round(time.Millisecond))
			return nil
		}
		if n%8 == 7 { // every 2s: a member that exited never gets ready
			if running, err := c.d.run(ctx, "inspect", "--format", "{{.State.Running}}", name); err == nil && running != "true" {
				return fmt.Errorf("%s is not running (last check: %v)", name, last)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %w", name, time.Since(t0).Round(time.Second), last)
		case <-tick.C:
		}
	}
}

func httpReady(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// natsReady: the server's monitor lists routes to the n other servers.
func natsReady(ctx context.Context, addr string, n int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/routez", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var rz struct {
		NumRoutes int `json:"num_routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rz); err != nil {
		return fmt.Errorf("cannot decode /routez: %w", err)
	}
	// A pair of servers may hold two routes for a moment; at least one
	// to each other server is what counts.
	if rz.NumRoutes < n {
		return fmt.Errorf("%d of %d routes", rz.NumRoutes, n)
	}
	return nil
}

func (c *Cluster) etcdReady(ctx context.Context, addr string) error {
	cli, err := c.etcdClient(addr)
	if err != nil {
		return err
	}
	defer cli.Close()
	st, err := cli.Status(ctx, addr)
	if err != nil {
		return err
	}
	if st.Leader == 0 {
		return fmt.Errorf("etcd %s has no leader", addr)
	}
	return nil
}

// EtcdClient is an etcd client of every member through its published
// port, with the cache nodes' certificate: what a test reads the truth
// from.
func (c *Cluster) EtcdClient() (*clientv3.Client, error) {
	eps := make([]string, c.cfg.Etcd)
	for i := range eps {
		eps[i] = c.HostAddr(Etcd, i)
	}
	return c.etcdClient(eps...)
}

func (c *Cluster) etcdClient(endpoints ...string) (*clientv3.Client, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(c.internal, "cachenode.crt"), filepath.Join(c.internal, "cachenode.key"))
	if err != nil {
		return nil, fmt.Errorf("cannot load the etcd client certificate: %w", err)
	}
	pool, err := loadPool(filepath.Join(c.internal, "ca.crt"))
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		// As kgate's own client: a member cut off is dropped in seconds,
		// not after the request's deadline.
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 5 * time.Second,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to etcd: %w", err)
	}
	return cli, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cannot read CA: no certificate in %s", file)
	}
	return pool, nil
}

// servingClient trusts the gateways' serving CA, without a client
// certificate (/readyz is public).
func (c *Cluster) servingClient() (*http.Client, error) {
	pool, err := loadPool(filepath.Join(c.serving, "ca.crt"))
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true}}, nil
}

// RESTConfig is the admin's client configuration (the kubeconfig kgate
// pki wrote) for the gateway at host ("127.0.0.1:port").
func (c *Cluster) RESTConfig(host string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("https://"+host, c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig: %w", err)
	}
	return cfg, nil
}

// BridgeRESTConfig is RESTConfig for a GatewayBridgeAddrs address: the
// serving certificate is checked for "localhost", a name it carries.
func (c *Cluster) BridgeRESTConfig(host string) (*rest.Config, error) {
	cfg, err := c.RESTConfig(host)
	if err != nil {
		return nil, err
	}
	cfg.TLSClientConfig.ServerName = "localhost"
	return cfg, nil
}
