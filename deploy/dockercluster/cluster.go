package dockercluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cluster is kgate on a private Docker network: etcd members, NATS
// servers, cache nodes and gateways, each in its own container, with the
// internal plane closed (mutual TLS, NATS credentials, gossip keyring).
// The host reaches etcd, the NATS monitors, the cache nodes' health
// endpoints and the gateways through ports published on 127.0.0.1 only.
type Cluster struct {
	cfg     Config
	d       docker
	log     *slog.Logger
	network string
	// serving and internal are the host directories of kgate pki's
	// serving and internal certificates.
	serving, internal string
	routePassword     string

	mu      sync.Mutex // guards members
	members map[string]*member
}

// Start creates the network and starts etcd, then NATS, then the cache
// nodes, then the gateways, each role once every member is ready. On
// error, everything created is removed.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg: cfg, d: docker{bin: cfg.Docker}, log: cfg.Logger, network: cfg.Name,
		serving: filepath.Join(cfg.Dir, "serving"), internal: filepath.Join(cfg.Dir, "internal"),
		members: map[string]*member{},
	}
	if c.serving, err = filepath.Abs(c.serving); err != nil {
		return nil, fmt.Errorf("cannot make cluster: %w", err)
	}
	if c.internal, err = filepath.Abs(c.internal); err != nil {
		return nil, fmt.Errorf("cannot make cluster: %w", err)
	}
	for _, img := range []string{cfg.Images.Kgate, cfg.Images.Etcd, cfg.Images.NATS} {
		if _, err := c.d.run(ctx, "image", "inspect", "--format", "{{.Id}}", img); err != nil {
			return nil, fmt.Errorf("cannot make cluster: image %s missing (make images builds it; images are never pulled): %w", img, err)
		}
	}
	if err := c.pki(ctx); err != nil {
		return nil, err
	}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return nil, fmt.Errorf("cannot make route password: %w", err)
	}
	c.routePassword = hex.EncodeToString(pw)
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			err = errors.Join(err, c.Close(cctx))
		}
	}()
	if _, err := c.d.run(ctx, "network", "create", "--driver", "bridge", "--label", LabelKey+"="+cfg.Name, c.network); err != nil {
		return nil, fmt.Errorf("cannot create network: %w", err)
	}
	for _, r := range []struct {
		role string
		n    int
		make func(int) (*member, error)
	}{
		{Etcd, cfg.Etcd, c.etcdMember}, {NATS, cfg.NATS, c.natsMember},
		{CacheNode, cfg.CacheNodes, c.cacheNodeMember}, {Gateway, cfg.Gateways, c.gatewayMember},
	} {
		t0 := time.Now()
		// Each role's members start together: etcd needs a quorum
		// before any member is ready.
		for i := range r.n {
			m, err := r.make(i)
			if err != nil {
				return nil, err
			}
			if err := c.create(ctx, m); err != nil {
				return nil, err
			}
			if _, err := c.d.run(ctx, "start", m.name); err != nil {
				return nil, fmt.Errorf("cannot start %s: %w", m.name, err)
			}
		}
		for i := range r.n {
			if err := c.WaitReady(ctx, r.role, i); err != nil {
				return nil, err
			}
		}
		c.log.Info("role ready", "role", r.role, "members", r.n, "took", time.Since(t0).Round(time.Millisecond))
	}
	return c, nil
}

// pki writes the certificates with kgate pki: the serving side for the
// gateways (127.0.0.1, where the host reaches them, and their names) and
// the internal plane for every member's name.
func (c *Cluster) pki(ctx context.Context) error {
	var all []string
	for _, r := range []struct {
		role string
		n    int
	}{{Etcd, c.cfg.Etcd}, {NATS, c.cfg.NATS}, {CacheNode, c.cfg.CacheNodes}, {Gateway, c.cfg.Gateways}} {
		all = append(all, c.names(r.role, r.n, "", "")...)
	}
	gws := c.names(Gateway, c.cfg.Gateways, "", "")
	cmd := exec.CommandContext(ctx, c.cfg.KgateBin, "pki", "--dir", c.serving,
		"--server", fmt.Sprintf("https://127.0.0.1:%d", securePort), "--hosts", strings.Join(append([]string{"127.0.0.1", "localhost"}, gws...), ","),
		"--internal-dir", c.internal, "--internal-hosts", strings.Join(append([]string{"127.0.0.1", "localhost"}, all...), ","))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot write certificates (kgate pki): %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// create makes m's container: on the cluster's network, labelled,
// without capabilities, its ports published on the host's loopback, its
// files copied in (owned by the image's user); not started.
func (c *Cluster) create(ctx context.Context, m *member) error {
	args := []string{"create", "--pull", "never", "--name", m.name, "--hostname", m.name,
		"--network", c.network, "--label", LabelKey + "=" + c.cfg.Name,
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges"}
	for _, v := range m.volumes {
		args = append(args, "--mount", "type=volume,destination="+v)
	}
	for port := range m.published {
		hp, err := freePort()
		if err != nil {
			return err
		}
		m.published[port] = hp
		args = append(args, "--publish", fmt.Sprintf("127.0.0.1:%d:%d", hp, port))
	}
	args = append(append(args, m.image), m.args...)
	c.mu.Lock()
	c.members[m.name] = m
	c.mu.Unlock()
	if _, err := c.d.run(ctx, args...); err != nil {
		return fmt.Errorf("cannot create %s: %w", m.name, err)
	}
	tar, err := archive(m.files, m.dirs...)
	if err != nil {
		return err
	}
	// A tar on stdin keeps the owners in its headers. --archive would
	// look the container's USER up in the daemon host's passwd database,
	// which FROM scratch images' numeric user is not in.
	if _, err := c.d.runInput(ctx, bytes.NewReader(tar), "cp", "-", m.name+":/"); err != nil {
		return fmt.Errorf("cannot copy files into %s: %w", m.name, err)
	}
	return nil
}

// freePort is a free TCP port on the host's loopback.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Name is the container name of role's member i (also its host name on
// the network).
func (c *Cluster) Name(role string, i int) string { return c.name(role, i) }

// member returns the member named name.
func (c *Cluster) member(name string) (*member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[name]
	if m == nil {
		return nil, fmt.Errorf("no member %s", name)
	}
	return m, nil
}

// HostAddr is the loopback address publishing role's member i's main
// port: etcd's client port, a NATS server's monitor, a cache node's
// health and metrics port, a gateway's HTTPS port.
func (c *Cluster) HostAddr(role string, i int) string {
	m, err := c.member(c.name(role, i))
	if err != nil {
		return ""
	}
	for _, hp := range m.published {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(hp))
	}
	return ""
}

// GatewayAddrs are the gateways' loopback addresses, by index.
func (c *Cluster) GatewayAddrs() []string {
	out := make([]string, c.cfg.Gateways)
	for i := range out {
		out[i] = c.HostAddr(Gateway, i)
	}
	return out
}

// GatewayBridgeAddrs are the gateways' addresses on the cluster's
// network, by index: the host reaches them over the bridge with no
// userland proxy in between (many connections, as thousands of watches
// make, are more than a published port's proxy carries). Use them with
// BridgeRESTConfig.
func (c *Cluster) GatewayBridgeAddrs(ctx context.Context) ([]string, error) {
	out := make([]string, c.cfg.Gateways)
	for i := range out {
		ip, err := c.IP(ctx, Gateway, i)
		if err != nil {
			return nil, err
		}
		out[i] = net.JoinHostPort(ip, strconv.Itoa(securePort))
	}
	return out, nil
}

// Kubeconfig is the admin kubeconfig (kgate pki's); its server is
// https://127.0.0.1:6443, so point clients at a GatewayAddrs entry.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.serving, "kubeconfig") }

// Stop stops role's member i as an orchestrator does: SIGTERM, then
// SIGKILL after grace.
func (c *Cluster) Stop(ctx context.Context, role string, i int, grace time.Duration) error {
	secs := strconv.Itoa(int((grace + time.Second - 1) / time.Second))
	if _, err := c.d.run(ctx, "stop", "--time", secs, c.name(role, i)); err != nil {
		return fmt.Errorf("cannot stop %s: %w", c.name(role, i), err)
	}
	return nil
}

// Kill kills role's member i at once (SIGKILL).
func (c *Cluster) Kill(ctx context.Context, role string, i int) error {
	if _, err := c.d.run(ctx, "kill", c.name(role, i)); err != nil {
		return fmt.Errorf("cannot kill %s: %w", c.name(role, i), err)
	}
	return nil
}

// StartMember starts role's stopped member i again (same container,
// files and ports) and waits until it is ready.
func (c *Cluster) StartMember(ctx context.Context, role string, i int) error {
	if _, err := c.d.run(ctx, "start", c.name(role, i)); err != nil {
		return fmt.Errorf("cannot start %s: %w", c.name(role, i), err)
	}
	return c.WaitReady(ctx, role, i)
}

// Pause freezes role's member i (docker pause); Unpause thaws it.
func (c *Cluster) Pause(ctx context.Context, role string, i int) error {
	_, err := c.d.run(ctx, "pause", c.name(role, i))
	return err
}

// Unpause thaws a paused member.
func (c *Cluster) Unpause(ctx context.Context, role string, i int) error {
	_, err := c.d.run(ctx, "unpause", c.name(role, i))
	return err
}

// Disconnect cuts role's member i off the cluster's network; Connect
// joins it again (under its name).
func (c *Cluster) Disconnect(ctx context.Context, role string, i int) error {
	_, err := c.d.run(ctx, "network", "disconnect", c.network, c.name(role, i))
	return err
}

// Connect joins a disconnected member to the network again.
func (c *Cluster) Connect(ctx context.Context, role string, i int) error {
	_, err := c.d.run(ctx, "network", "connect", c.network, c.name(role, i))
	return err
}

// Logs returns the last tail lines (0: all) of container name's output.
func (c *Cluster) Logs(ctx context.Context, name string, tail int) (string, error) {
	args := []string{"logs"}
	if tail > 0 {
		args = append(args, "--tail", strconv.Itoa(tail))
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.cfg.Docker, append(args, name)...)
	cmd.Stdout, cmd.Stderr = &out, &out // the roles log to stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("cannot read logs of %s: %w", name, err)
	}
	return out.String(), nil
}

// DumpLogs writes every container's whole output to dir/<name>.log and
// returns the last tail lines of each, for a failed test's log.
func (c *Cluster) DumpLogs(ctx context.Context, dir string, tail int) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot dump logs: %w", err)
	}
	var sb strings.Builder
	var errs []error
	for _, name := range c.containers() {
		out, err := c.Logs(ctx, name, 0)
		if err != nil {
			errs = append(errs, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".log"), []byte(out), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("cannot dump logs: %w", err))
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		fmt.Fprintf(&sb, "=== %s (last %d lines; all in %s)\n%s\n", name, tail, filepath.Join(dir, name+".log"),
			strings.Join(lines[max(0, len(lines)-tail):], "\n"))
	}
	return sb.String(), errors.Join(errs...)
}

// containers lists the cluster's containers by name, in start order.
func (c *Cluster) containers() []string {
	var out []string
	for _, r := range []struct {
		role string
		n    int
	}{{Etcd, c.cfg.Etcd}, {NATS, c.cfg.NATS}, {CacheNode, c.cfg.CacheNodes}, {Gateway, c.cfg.Gateways}} {
		out = append(out, c.names(r.role, r.n, "", "")...)
	}
	return out
}

// Close removes every container and the network of the cluster: what
// carries its label, so also what a failed Start left half made.
func (c *Cluster) Close(ctx context.Context) error {
	return Remove(ctx, c.cfg.Docker, c.cfg.Name)
}

// Remove removes every container and network labelled with name
// (LabelKey=name), running or not.
func Remove(ctx context.Context, dockerBin, name string) error {
	d := docker{bin: dockerBin}
	filter := "label=" + LabelKey + "=" + name
	var errs []error
	ids, err := d.run(ctx, "ps", "--all", "--quiet", "--filter", filter)
	if err != nil {
		errs = append(errs, err)
	} else if ids != "" {
		if _, err := d.run(ctx, append([]string{"rm", "--force", "--volumes"}, strings.Fields(ids)...)...); err != nil {
			errs = append(errs, err)
		}
	}
	nets, err := d.run(ctx, "network", "ls", "--quiet", "--filter", filter)
	if err != nil {
		errs = append(errs, err)
	} else if nets != "" {
		if _, err := d.run(ctx, append([]string{"network", "rm"}, strings.Fields(nets)...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cannot remove cluster %s: %w", name, err)
	}
	return nil
}
