// Package placement decides, on every cache node, which ranges it
// reflects and which it publishes, from the same inputs every node sees:
// the live cache nodes (membership) ranked per range by rendezvous
// hashing, and which nodes are ready for which range (the directory).
//
// A node reflects the ranges it owns (it is among the range's R best
// ranked nodes) and keeps a range it no longer owns until every owner is
// ready, so a handoff never leaves a range unserved. A range's primary —
// the only node publishing its events on NATS — is its first ready owner
// in rank order, or while no owner is ready, the first ready node still
// serving it. Nodes may briefly disagree; two primaries publish duplicates
// that gateways drop, none leaves a gap gateways repair from a window.
package placement

import (
	"context"
	"errors"
	"slices"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/storage/ranges"
)

// members is the membership a placement reads.
type members interface {
	CacheNodes() []cluster.Member
	LocalName() string
	Changes() <-chan struct{}
}

// readiness is the directory a placement reads.
type readiness interface {
	Ready(rangeID string) []directory.Replica
	Changes() <-chan struct{}
}

// DefaultReplicas is how many nodes own each range.
const DefaultReplicas = 2

// Config configures a Placement.
type Config struct {
	Members   members
	Directory readiness
	// Replicas is the number of owners per range. Default DefaultReplicas.
	Replicas int
}

// Placement is one node's view of who serves what.
type Placement struct {
	cfg     Config
	self    string
	changes chan struct{} // capacity 1
}

// New returns a placement; Run relays the changes of its inputs.
func New(cfg Config) (*Placement, error) {
	if cfg.Members == nil || cfg.Directory == nil {
		return nil, errors.New("cannot make placement: Members and Directory are required")
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = DefaultReplicas
	}
	return &Placement{cfg: cfg, self: cfg.Members.LocalName(), changes: make(chan struct{}, 1)}, nil
}

// Run relays changes of membership and readiness until ctx ends.
func (p *Placement) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.cfg.Members.Changes():
		case <-p.cfg.Directory.Changes():
		}
		select {
		case p.changes <- struct{}{}:
		default:
		}
	}
}

// Changes fires when who serves what may have changed.
func (p *Placement) Changes() <-chan struct{} { return p.changes }

// Owners returns the nodes that own rangeID, best first.
func (p *Placement) Owners(rangeID string) []string {
	nodes := p.cfg.Members.CacheNodes()
	names := make([]string, 0, len(nodes))
	for _, m := range nodes {
		names = append(names, m.Name)
	}
	return ranges.Owners(rangeID, names, p.cfg.Replicas)
}

// readyNodes returns the nodes the directory reports ready for rangeID,
// plus this node when ready says so (its own announcement may lag).
func (p *Placement) readyNodes(rangeID string, ready bool) map[string]bool {
	out := map[string]bool{}
	for _, r := range p.cfg.Directory.Ready(rangeID) {
		out[r.Node] = true
	}
	if ready {
		out[p.self] = true
	} else {
		delete(out, p.self)
	}
	return out
}

// Owns reports whether this node is one of rangeID's owners.
func (p *Placement) Owns(rangeID string) bool { return slices.Contains(p.Owners(rangeID), p.self) }

// Wants reports whether this node should reflect rangeID: it owns it, or
// it serves it (ready) and some owner is not ready yet.
func (p *Placement) Wants(rangeID string, ready bool) bool {
	owners := p.Owners(rangeID)
	if slices.Contains(owners, p.self) {
		return true
	}
	if !ready {
		return false
	}
	readyNow := p.readyNodes(rangeID, ready)
	for _, o := range owners {
		if !readyNow[o] {
			return true // hand over only to owners that can serve
		}
	}
	return false
}

// Primary reports whether this node publishes rangeID: the first ready
// owner in rank order, else the first (by name) ready node serving it.
func (p *Placement) Primary(rangeID string, ready bool) bool {
	readyNow := p.readyNodes(rangeID, ready)
	for _, o := range p.Owners(rangeID) {
		if readyNow[o] {
			return o == p.self
		}
	}
	others := make([]string, 0, len(readyNow))
	for n := range readyNow {
		others = append(others, n)
	}
	slices.Sort(others)
	return len(others) > 0 && others[0] == p.self
}
