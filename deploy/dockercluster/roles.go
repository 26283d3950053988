package dockercluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Ports inside the containers.
const (
	etcdClientPort  = 2379
	etcdPeerPort    = 2380
	natsClientPort  = 4222
	natsRoutePort   = 6222
	natsMonitorPort = 8222
	readPort        = 7443 // a cache node's read API
	metricsPort     = 7444 // a cache node's /metrics, /readyz
	gossipPort      = 7946
	securePort      = 6443 // a gateway's HTTPS
)

// Where the files live inside the containers.
const (
	internalDir = "/etc/kgate/internal"
	servingDir  = "/etc/kgate/serving"
	natsConf    = "/etc/nats/nats.conf"
	etcdDataDir = "/data"
)

// member is one container of the cluster.
type member struct {
	role  string
	index int
	name  string // the container's, also its DNS name on the network
	image string
	args  []string
	files []File
	dirs  []string
	// volumes are directories on a volume of their own (the host's
	// disk), not in the container's file system: the image store's
	// driver here is fuse-overlayfs, through which etcd's fsyncs are slow.
	volumes []string
	// published maps container ports to loopback ports of the host,
	// fixed when the container is made so that they survive restarts.
	published map[int]int
}

// hostPort is the loopback port of the host publishing port.
func (m *member) hostPort(port int) int { return m.published[port] }

// name is the container name of role's member i.
func (c *Cluster) name(role string, i int) string {
	return fmt.Sprintf("%s-%s-%d", c.cfg.Name, role, i)
}

// names are the container names of role's members, with suffix.
func (c *Cluster) names(role string, n int, prefix, suffix string) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = prefix + c.name(role, i) + suffix
	}
	return out
}

// readFiles reads files of the host directory dir into container files
// under into, with mode.
func readFiles(dir, into string, mode int64, names ...string) ([]File, error) {
	out := make([]File, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("cannot read certificate file: %w", err)
		}
		out = append(out, File{Path: into + "/" + n, Data: b, Mode: mode})
	}
	return out, nil
}

// internalFiles are the internal CA and the certificate, key and further
// secrets named by stem (e.g. "gateway": gateway.crt and gateway.key).
func (c *Cluster) internalFiles(stem string, secrets ...string) ([]File, error) {
	pub, err := readFiles(c.internal, internalDir, 0o644, "ca.crt", stem+".crt")
	if err != nil {
		return nil, err
	}
	priv, err := readFiles(c.internal, internalDir, 0o600, append([]string{stem + ".key"}, secrets...)...)
	if err != nil {
		return nil, err
	}
	return append(pub, priv...), nil
}

func (c *Cluster) etcdMember(i int) (*member, error) {
	files, err := c.internalFiles("etcd-server")
	if err != nil {
		return nil, err
	}
	self := c.name(Etcd, i)
	initial := make([]string, c.cfg.Etcd)
	for j := range c.cfg.Etcd {
		initial[j] = fmt.Sprintf("%s=https://%s:%d", c.name(Etcd, j), c.name(Etcd, j), etcdPeerPort)
	}
	crt, key, ca := internalDir+"/etcd-server.crt", internalDir+"/etcd-server.key", internalDir+"/ca.crt"
	return &member{
		role: Etcd, index: i, name: self, image: c.cfg.Images.Etcd, files: files, dirs: []string{etcdDataDir}, volumes: []string{etcdDataDir},
		published: map[int]int{etcdClientPort: 0},
		args: []string{
			"--name", self, "--data-dir", etcdDataDir + "/etcd",
			"--listen-client-urls", fmt.Sprintf("https://0.0.0.0:%d", etcdClientPort),
			"--advertise-client-urls", fmt.Sprintf("https://%s:%d", self, etcdClientPort),
			"--listen-peer-urls", fmt.Sprintf("https://0.0.0.0:%d", etcdPeerPort),
			"--initial-advertise-peer-urls", fmt.Sprintf("https://%s:%d", self, etcdPeerPort),
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", c.cfg.Name,
			// Clients and peers both need a certificate from the internal CA.
			"--cert-file", crt, "--key-file", key, "--client-cert-auth", "--trusted-ca-file", ca,
			"--peer-cert-file", crt, "--peer-key-file", key, "--peer-client-cert-auth", "--peer-trusted-ca-file", ca,
			"--watch-progress-notify-interval", "1s",
		},
	}, nil
}

// natsMember is a NATS server: clients over TLS with the roles'
// credentials and permissions (kgate pki's configuration), routes over
// mutual TLS with a route password only the NATS servers know, so that a
// kgate role's certificate (from the same CA) cannot pose as a route.
func (c *Cluster) natsMember(i int) (*member, error) {
	files, err := c.internalFiles("nats-server")
	if err != nil {
		return nil, err
	}
	roles, err := os.ReadFile(filepath.Join(c.internal, "nats-server.conf"))
	if err != nil {
		return nil, fmt.Errorf("cannot read the NATS configuration of kgate pki: %w", err)
	}
	// kgate pki names the files where it wrote them; here they live in
	// internalDir.
	fragment := strings.ReplaceAll(string(roles), c.internal+"/", internalDir+"/")
	var routes []string
	for j := range c.cfg.NATS {
		if j != i {
			routes = append(routes, strconv.Quote(fmt.Sprintf("nats://route:%s@%s:%d", c.routePassword, c.name(NATS, j), natsRoutePort)))
		}
	}
	conf := fmt.Sprintf(`server_name: %q
listen: "0.0.0.0:%d"
http: "0.0.0.0:%d"
max_payload: 8MB
cluster {
  name: kgate
  listen: "0.0.0.0:%d"
  no_advertise: true
  routes: [%s]
  tls {
    cert_file: %q
    key_file: %q
    ca_file: %q
    timeout: 5
  }
  authorization {
    user: route
    password: %q
    timeout: 5
  }
}
%s`, c.name(NATS, i), natsClientPort, natsMonitorPort, natsRoutePort, strings.Join(routes, ", "),
		internalDir+"/nats-server.crt", internalDir+"/nats-server.key", internalDir+"/ca.crt", c.routePassword, fragment)
	if strings.Contains(conf, c.internal) {
		return nil, fmt.Errorf("cannot configure NATS: kgate pki's configuration names a file outside %s", c.internal)
	}
	files = append(files, File{Path: natsConf, Data: []byte(conf), Mode: 0o600})
	return &member{
		role: NATS, index: i, name: c.name(NATS, i), image: c.cfg.Images.NATS, files: files,
		published: map[int]int{natsMonitorPort: 0},
		args:      []string{"-c", natsConf},
	}, nil
}

// backendArgs are the flags both kgate roles take: etcd and NATS with
// TLS and role's certificate and credentials, the read API's mutual TLS
// and the gossip keyring; gossip joins through every cache node.
func (c *Cluster) backendArgs(role string, i int) []string {
	crt, key := internalDir+"/"+role+".crt", internalDir+"/"+role+".key"
	return []string{
		"--node-name", fmt.Sprintf("%s-%d", role, i),
		"--etcd-servers", strings.Join(c.names(Etcd, c.cfg.Etcd, "https://", ":"+strconv.Itoa(etcdClientPort)), ","),
		"--nats-url", strings.Join(c.names(NATS, c.cfg.NATS, "tls://", ":"+strconv.Itoa(natsClientPort)), ","),
		"--etcd-cafile", internalDir + "/ca.crt", "--etcd-certfile", crt, "--etcd-keyfile", key,
		"--internal-ca-file", internalDir + "/ca.crt", "--internal-cert-file", crt, "--internal-key-file", key,
		"--nats-credentials-file", internalDir + "/nats-" + role + ".creds",
		"--cluster-key-file", internalDir + "/cluster.key",
		"--cluster-bind-address", fmt.Sprintf("0.0.0.0:%d", gossipPort),
		"--join", strings.Join(c.names(CacheNode, c.cfg.CacheNodes, "", ":"+strconv.Itoa(gossipPort)), ","),
	}
}

func (c *Cluster) cacheNodeMember(i int) (*member, error) {
	files, err := c.internalFiles(CacheNode, "nats-cachenode.creds", "cluster.key")
	if err != nil {
		return nil, err
	}
	args := append([]string{"cachenode"}, c.backendArgs(CacheNode, i)...)
	args = append(args, "--listen", fmt.Sprintf("0.0.0.0:%d", readPort), "--metrics-address", fmt.Sprintf("0.0.0.0:%d", metricsPort),
		"--replicas", strconv.Itoa(c.cfg.Replicas))
	return &member{
		role: CacheNode, index: i, name: c.name(CacheNode, i), image: c.cfg.Images.Kgate, files: files, args: args,
		published: map[int]int{metricsPort: 0},
	}, nil
}

func (c *Cluster) gatewayMember(i int) (*member, error) {
	files, err := c.internalFiles(Gateway, "nats-gateway.creds", "cluster.key")
	if err != nil {
		return nil, err
	}
	pub, err := readFiles(c.serving, servingDir, 0o644, "ca.crt", "serving.crt")
	if err != nil {
		return nil, err
	}
	priv, err := readFiles(c.serving, servingDir, 0o600, "serving.key")
	if err != nil {
		return nil, err
	}
	files = append(append(files, pub...), priv...)
	args := append([]string{"gateway"}, c.backendArgs(Gateway, i)...)
	args = append(args, "--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(securePort),
		"--tls-cert-file", servingDir+"/serving.crt", "--tls-private-key-file", servingDir+"/serving.key",
		"--client-ca-file", servingDir+"/ca.crt", "--shutdown-delay-duration", c.cfg.ShutdownDelay.String())
	return &member{
		role: Gateway, index: i, name: c.name(Gateway, i), image: c.cfg.Images.Kgate, files: files, args: args,
		published: map[int]int{securePort: 0},
	}, nil
}
