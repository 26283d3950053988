// Package clusterstatus builds the cluster status `kgate status` prints,
// as one gateway sees it: etcd's revision, the members, and each range's
// owners and ready replicas with their lag.
package clusterstatus

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/storage/ranges"
)

// Members is the membership a gateway reports.
type Members interface{ Members() []cluster.Member }

// Sources are what the status is built from.
type Sources struct {
	Revisions interface {
		Current(ctx context.Context) (int64, error)
	}
	// Members is optional.
	Members Members
	Ranges  ranges.Source
	// Directory tells the ready replicas (scale-out); without it every
	// range is served by CacheNodes.
	Directory  *directory.Directory
	CacheNodes []string
	// Replicas is the number of owners per range.
	Replicas int
}

// Status is the document at StatusPath.
type Status struct {
	Revision int64          `json:"revision"` // etcd's current revision
	Members  []MemberStatus `json:"members"`
	Ranges   []RangeStatus  `json:"ranges"`
}

// MemberStatus is one member of the cluster.
type MemberStatus struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Addr     string `json:"addr"`
	ReadAddr string `json:"readAddr,omitempty"`
	Since    string `json:"since"`
}

// RangeStatus is one range and who serves it.
type RangeStatus struct {
	ID       string          `json:"id"`
	Start    string          `json:"start"`
	End      string          `json:"end"`
	Owners   []string        `json:"owners"`
	Replicas []ReplicaStatus `json:"replicas"`
}

// ReplicaStatus is one ready replica of a range.
type ReplicaStatus struct {
	Node    string `json:"node"`
	Primary bool   `json:"primary"`
	Seen    int64  `json:"seen"`
	Lag     int64  `json:"lag"` // revisions behind etcd
}

// Build builds the cluster status from s.
func Build(ctx context.Context, s Sources) (*Status, error) {
	rev, err := s.Revisions.Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot learn etcd's revision: %w", err)
	}
	st := &Status{Revision: rev}
	var cacheNodes []string
	if s.Members != nil {
		for _, m := range s.Members.Members() {
			st.Members = append(st.Members, MemberStatus{
				Name: m.Name, Role: string(m.Role), Addr: m.Addr, ReadAddr: m.ReadAddr,
				Since: time.Unix(0, m.Epoch).UTC().Format(time.RFC3339),
			})
			if m.Role == cluster.RoleCacheNode {
				cacheNodes = append(cacheNodes, m.Name)
			}
		}
	}
	for _, r := range s.Ranges.Current().All() {
		rs := RangeStatus{ID: r.ID, Start: r.Start, End: r.End, Owners: ranges.Owners(r.ID, cacheNodes, s.Replicas)}
		if s.Directory != nil {
			for _, rep := range s.Directory.Ready(r.ID) {
				rs.Replicas = append(rs.Replicas, ReplicaStatus{Node: rep.Node, Primary: rep.Primary, Seen: rep.Seen, Lag: max(0, rev-rep.Seen)})
			}
		} else {
			for _, addr := range s.CacheNodes {
				rs.Replicas = append(rs.Replicas, ReplicaStatus{Node: addr})
			}
		}
		st.Ranges = append(st.Ranges, rs)
	}
	slices.SortFunc(st.Ranges, func(a, b RangeStatus) int {
		if a.Start < b.Start {
			return -1
		}
		return 1
	})
	return st, nil
}
