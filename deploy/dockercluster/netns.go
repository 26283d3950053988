package dockercluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Members is how many members role has.
func (c *Cluster) Members(role string) int {
	switch role {
	case Etcd:
		return c.cfg.Etcd
	case NATS:
		return c.cfg.NATS
	case CacheNode:
		return c.cfg.CacheNodes
	case Gateway:
		return c.cfg.Gateways
	}
	return 0
}

// StartMembers starts role's stopped members idx together, then waits
// until each is ready: etcd members need each other for a quorum.
func (c *Cluster) StartMembers(ctx context.Context, role string, idx ...int) error {
	for _, i := range idx {
		if _, err := c.d.run(ctx, "start", c.name(role, i)); err != nil {
			return fmt.Errorf("cannot start %s: %w", c.name(role, i), err)
		}
	}
	for _, i := range idx {
		if err := c.WaitReady(ctx, role, i); err != nil {
			return err
		}
	}
	return nil
}

// IP is role's member i's address on the cluster's network.
func (c *Cluster) IP(ctx context.Context, role string, i int) (string, error) {
	ip, err := c.d.run(ctx, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+c.network+"\").IPAddress}}", c.name(role, i))
	if err != nil || ip == "" {
		return "", fmt.Errorf("cannot find the address of %s: %w", c.name(role, i), err)
	}
	return ip, nil
}

// InNetNS runs the host's command args (iptables, tc) inside role's
// member i's network namespace, as the images have no such tools: a
// partition of one link or a slow link without touching the member. It
// needs the engine on this host and the right to enter a namespace
// (root).
func (c *Cluster) InNetNS(ctx context.Context, role string, i int, args ...string) error {
	pid, err := c.d.run(ctx, "inspect", "--format", "{{.State.Pid}}", c.name(role, i))
	if err != nil {
		return fmt.Errorf("cannot find the process of %s: %w", c.name(role, i), err)
	}
	if pid == "" || pid == "0" {
		return fmt.Errorf("cannot enter %s: it is not running", c.name(role, i))
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--target", pid, "--net", "--"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot run %s in %s's network: %w: %s", strings.Join(args, " "), c.name(role, i), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NetNSAvailable reports why InNetNS cannot work here; nil when it can.
func NetNSAvailable() error {
	for _, tool := range []string{"nsenter", "iptables", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("no %s on the host: %w", tool, err)
		}
	}
	return nil
}

// Replicas is how many cache nodes own each range.
func (c *Cluster) Replicas() int { return c.cfg.Replicas }
