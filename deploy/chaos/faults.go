package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"

	dc "github.com/kgate/kgate/deploy/dockercluster"
)

// fault is one thing done to the cluster and undone.
type fault struct {
	name string
	// inject does it; heal undoes it and returns once the members it
	// touched are ready again.
	inject, heal func(context.Context) error
	// relistOK: the fault loses every replica of a range at once, so a
	// watcher resuming from before it is truly outside every window and
	// may have to list again (a 410), as after a kube-apiserver restart.
	relistOK bool
	// available, when set, says why the fault cannot be injected here.
	available func(context.Context) error
}

// faulter makes the faults of a cluster.
type faulter struct {
	c        *dc.Cluster
	rng      *rand.Rand
	slow     func() func() // makes a watcher stop reading
	leaderOf func(context.Context) (int, error)
}

// member is one member: a role and an index.
type member struct {
	role string
	i    int
}

func (m member) String() string { return fmt.Sprintf("%s-%d", m.role, m.i) }

// pick is a member of role chosen by the seed.
func (f *faulter) pick(role string) member {
	return member{role, f.rng.IntN(f.c.Members(role))}
}

// two are two different members of role chosen by the seed.
func (f *faulter) two(role string) (member, member) {
	n := f.c.Members(role)
	a := f.rng.IntN(n)
	b := (a + 1 + f.rng.IntN(n-1)) % n
	return member{role, a}, member{role, b}
}

// all lists every fault, in the seed's order, those matching only.
func (f *faulter) all(only *regexp.Regexp) []fault {
	var out []fault
	for _, role := range []string{dc.Gateway, dc.CacheNode, dc.NATS, dc.Etcd} {
		out = append(out, f.kill(f.pick(role)))
	}
	out = append(out,
		f.kill(f.two(dc.CacheNode)),
		f.kill(f.two(dc.Gateway)),
		f.isolate(f.pick(dc.CacheNode)),
		f.isolate(f.pick(dc.Gateway)),
		f.isolate(f.pick(dc.NATS)),
		f.isolateEtcdLeader(),
		f.gatewayWithoutNATS(f.pick(dc.Gateway)),
		f.natsRouteLoss(f.pick(dc.NATS)),
		f.killEtcdLeader(),
		f.restartEtcd(),
		f.pause(f.pick(dc.CacheNode)),
		f.slowWatcher(),
		f.slowLink(f.pick(dc.CacheNode)),
	)
	f.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if only == nil {
		return out
	}
	var kept []fault
	for _, ft := range out {
		if only.MatchString(ft.name) {
			kept = append(kept, ft)
		}
	}
	return kept
}

// kill kills members with SIGKILL and starts them again.
func (f *faulter) kill(ms ...member) fault {
	name := "kill -9 " + ms[0].String()
	if len(ms) > 1 {
		name = fmt.Sprintf("kill -9 %s and %s at once", ms[0], ms[1])
	}
	return fault{
		name:     name,
		relistOK: len(ms) > 1 && ms[0].role == dc.CacheNode && f.c.Replicas() <= len(ms),
		inject: func(ctx context.Context) error {
			for _, m := range ms {
				if err := f.c.Kill(ctx, m.role, m.i); err != nil {
					return err
				}
			}
			return nil
		},
		heal: func(ctx context.Context) error {
			idx := make([]int, len(ms))
			for k, m := range ms {
				idx[k] = m.i
			}
			return f.c.StartMembers(ctx, ms[0].role, idx...)
		},
	}
}

// iptables rules that cut a member off its network (eth0): from its
// peers and, through the published ports, from the host.
var isolateRules = [][]string{
	{"INPUT", "-i", "eth0", "-j", "DROP"},
	{"OUTPUT", "-o", "eth0", "-j", "DROP"},
}

// rules inserts (add) or deletes rules in m's network namespace.
func (f *faulter) rules(ctx context.Context, m member, add bool, rules [][]string) error {
	var errs []error
	for _, r := range rules {
		op := "-D"
		if add {
			op = "-I"
		}
		if err := f.c.InNetNS(ctx, m.role, m.i, append([]string{"iptables", "-w", op}, r...)...); err != nil {
			if add {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// partition applies rules to m for the fault and removes them to heal.
func (f *faulter) partition(name string, m func(context.Context) (member, error), rules func(context.Context) ([][]string, error)) fault {
	var target member
	var applied [][]string
	return fault{
		name: name,
		inject: func(ctx context.Context) error {
			var err error
			if target, err = m(ctx); err != nil {
				return err
			}
			if applied, err = rules(ctx); err != nil {
				return err
			}
			return f.rules(ctx, target, true, applied)
		},
		heal: func(ctx context.Context) error {
			if err := f.rules(ctx, target, false, applied); err != nil {
				return err
			}
			return f.c.WaitReady(ctx, target.role, target.i)
		},
	}
}

func fixed(m member) func(context.Context) (member, error) {
	return func(context.Context) (member, error) { return m, nil }
}

func constant(rules [][]string) func(context.Context) ([][]string, error) {
	return func(context.Context) ([][]string, error) { return rules, nil }
}

// isolate cuts m off the network.
func (f *faulter) isolate(m member) fault {
	return f.partition("partition isolating "+m.String(), fixed(m), constant(isolateRules))
}

// isolateEtcdLeader cuts etcd's leader of the moment off.
func (f *faulter) isolateEtcdLeader() fault {
	return f.partition("partition isolating the etcd leader", f.etcdLeader, constant(isolateRules))
}

func (f *faulter) etcdLeader(ctx context.Context) (member, error) {
	i, err := f.leaderOf(ctx)
	return member{dc.Etcd, i}, err
}

// gatewayWithoutNATS cuts m's links to every NATS server, not those to
// its clients, etcd or the cache nodes.
func (f *faulter) gatewayWithoutNATS(m member) fault {
	return f.partition(m.String()+" cut off from NATS", fixed(m), func(ctx context.Context) ([][]string, error) {
		var rules [][]string
		for i := range f.c.Members(dc.NATS) {
			ip, err := f.c.IP(ctx, dc.NATS, i)
			if err != nil {
				return nil, err
			}
			rules = append(rules, []string{"INPUT", "-s", ip, "-j", "DROP"}, []string{"OUTPUT", "-d", ip, "-j", "DROP"})
		}
		return rules, nil
	})
}

// natsRouteLoss cuts m's routes to the other NATS servers (both
// directions), not its clients.
func (f *faulter) natsRouteLoss(m member) fault {
	var rules [][]string
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		for _, dir := range []string{"--dport", "--sport"} {
			rules = append(rules, []string{chain, "-p", "tcp", dir, "6222", "-j", "DROP"})
		}
	}
	return f.partition("NATS route loss at "+m.String(), fixed(m), constant(rules))
}

// killEtcdLeader kills etcd's leader of the moment and starts it again.
func (f *faulter) killEtcdLeader() fault {
	var target member
	return fault{
		name: "kill -9 the etcd leader",
		inject: func(ctx context.Context) error {
			var err error
			if target, err = f.etcdLeader(ctx); err != nil {
				return err
			}
			return f.c.Kill(ctx, target.role, target.i)
		},
		heal: func(ctx context.Context) error { return f.c.StartMembers(ctx, target.role, target.i) },
	}
}

// restartEtcd kills every etcd member and starts them all again.
func (f *faulter) restartEtcd() fault {
	n := f.c.Members(dc.Etcd)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return fault{
		name: "whole etcd killed and restarted",
		inject: func(ctx context.Context) error {
			for i := range n {
				if err := f.c.Kill(ctx, dc.Etcd, i); err != nil {
					return err
				}
			}
			return nil
		},
		heal: func(ctx context.Context) error { return f.c.StartMembers(ctx, dc.Etcd, idx...) },
	}
}

// pause freezes m (SIGSTOP to every process) and thaws it.
func (f *faulter) pause(m member) fault {
	return fault{
		name:   "frozen " + m.String() + " (docker pause)",
		inject: func(ctx context.Context) error { return f.c.Pause(ctx, m.role, m.i) },
		heal: func(ctx context.Context) error {
			if err := f.c.Unpause(ctx, m.role, m.i); err != nil {
				return err
			}
			return f.c.WaitReady(ctx, m.role, m.i)
		},
	}
}

// slowWatcher makes one watcher stop reading its stream.
func (f *faulter) slowWatcher() fault {
	var resume func()
	return fault{
		name:   "a watcher stops reading",
		inject: func(context.Context) error { resume = f.slow(); return nil },
		heal:   func(context.Context) error { resume(); return nil },
	}
}

// slowLink delays and drops m's packets (netem).
func (f *faulter) slowLink(m member) fault {
	return fault{
		name: "slow, lossy link of " + m.String() + " (netem 100ms±20ms, 5% loss)",
		available: func(ctx context.Context) error {
			// The kernel may lack sch_netem: try it on the loopback.
			if err := f.c.InNetNS(ctx, m.role, m.i, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"); err != nil {
				return fmt.Errorf("no netem here: %w", err)
			}
			return f.c.InNetNS(ctx, m.role, m.i, "tc", "qdisc", "del", "dev", "lo", "root")
		},
		inject: func(ctx context.Context) error {
			return f.c.InNetNS(ctx, m.role, m.i, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "100ms", "20ms", "loss", "5%")
		},
		heal: func(ctx context.Context) error {
			if err := f.c.InNetNS(ctx, m.role, m.i, "tc", "qdisc", "del", "dev", "eth0", "root"); err != nil {
				return err
			}
			return f.c.WaitReady(ctx, m.role, m.i)
		},
	}
}
