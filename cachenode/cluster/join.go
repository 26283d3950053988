package cluster

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"time"
)

// joinLoop joins the cluster named by cfg.Join: at once, then with
// exponential backoff until another member is reached. Afterwards it
// checks every JoinRetryMax whether this member is alone again (its peers
// all declared dead: a partition, a rollout of every peer) and rejoins.
func (c *Cluster) joinLoop(ctx context.Context) {
	if len(c.cfg.Join) == 0 {
		return
	}
	t := c.cfg.Timing
	backoff := t.JoinRetry
	failures := 0
	for {
		var wait time.Duration
		switch {
		case !c.alone():
			backoff, failures, wait = t.JoinRetry, 0, t.JoinRetryMax
		case c.join(ctx):
			c.log.Info("joined the cluster", "members", len(c.Members()), "after_failures", failures)
			backoff, failures, wait = t.JoinRetry, 0, t.JoinRetryMax
		default:
			failures++
			wait, backoff = backoff, min(2*backoff, t.JoinRetryMax)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// alone reports whether this member knows no other alive member.
func (c *Cluster) alone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members) <= 1
}

// join makes one attempt: it resolves cfg.Join and joins through the
// first address that answers (a join syncs the whole member list, one
// peer is enough). It reports whether another member is now known.
func (c *Cluster) join(ctx context.Context) bool {
	addrs := c.resolve(ctx)
	if len(addrs) == 0 {
		c.log.Debug("nothing to join yet", "join", c.cfg.Join)
		return false
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	for _, a := range addrs {
		if ctx.Err() != nil {
			return false
		}
		if n, err := c.ml.Join([]string{a}); n == 0 {
			c.log.Debug("cannot join", "addr", a, "err", err)
			continue
		}
		if !c.alone() {
			return true
		}
	}
	return false
}

// resolve turns cfg.Join into ip:port addresses, without duplicates and
// without this member's own address (a headless Service lists this pod
// too; joining oneself would count as a success and leave two pods that
// started together in two clusters).
func (c *Cluster) resolve(ctx context.Context) []string {
	self := c.Addr()
	_, ownPort, _ := net.SplitHostPort(self)
	defPort, _ := strconv.Atoi(ownPort)
	seen := map[string]bool{self: true}
	var out []string
	add := func(ip net.IP, port int) {
		a := net.JoinHostPort(ip.String(), strconv.Itoa(port))
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, j := range c.cfg.Join {
		host, port, err := splitJoin(j, defPort)
		if err != nil {
			continue // checked in New
		}
		if ip := net.ParseIP(host); ip != nil {
			add(ip, port)
			continue
		}
		ips, err := c.lookup(ctx, host)
		if err != nil {
			c.log.Debug("cannot resolve join address", "host", host, "err", err)
			continue
		}
		for _, ip := range ips {
			add(ip, port)
		}
	}
	return out
}

// lookup resolves host to its IPv4 addresses, or IPv6 when it has none.
func (c *Cluster) lookup(ctx context.Context, host string) ([]net.IP, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timing.TCPTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", host)
	if err == nil && len(ips) > 0 {
		return ips, nil
	}
	ips6, err6 := net.DefaultResolver.LookupIP(ctx, "ip6", host)
	if err6 == nil && len(ips6) > 0 {
		return ips6, nil
	}
	return nil, errors.Join(err, err6)
}

// splitJoin parses a Join entry: host:port, or a host with defPort.
func splitJoin(s string, defPort int) (string, int, error) {
	host, port, err := splitHostPort(s, defPort)
	if err == nil && host == "" {
		err = errors.New("empty host")
	}
	return host, port, err
}
