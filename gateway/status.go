package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/storage/ranges"
)

// StatusPath serves the cluster status `kgate status` prints. Like any
// non-resource URL it is authorized by RBAC (cluster-admin has it).
const StatusPath = "/kgate/status"

// members is the membership a gateway reports.
type members interface{ Members() []cluster.Member }

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

// status builds the cluster status as this gateway sees it.
func (g *Gateway) status(ctx context.Context) (*Status, error) {
	rev, err := g.d.Backend.Revisions.Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot learn etcd's revision: %w", err)
	}
	st := &Status{Revision: rev}
	var cacheNodes []string
	if g.d.Members != nil {
		for _, m := range g.d.Members.Members() {
			st.Members = append(st.Members, MemberStatus{
				Name: m.Name, Role: string(m.Role), Addr: m.Addr, ReadAddr: m.ReadAddr,
				Since: time.Unix(0, m.Epoch).UTC().Format(time.RFC3339),
			})
			if m.Role == cluster.RoleCacheNode {
				cacheNodes = append(cacheNodes, m.Name)
			}
		}
	}
	for _, r := range g.d.Backend.Ranges.All() {
		rs := RangeStatus{ID: r.ID, Start: r.Start, End: r.End, Owners: ranges.Owners(r.ID, cacheNodes, g.cfg.Replicas)}
		if g.d.Directory != nil {
			for _, rep := range g.d.Directory.Ready(r.ID) {
				rs.Replicas = append(rs.Replicas, ReplicaStatus{Node: rep.Node, Primary: rep.Primary, Seen: rep.Seen, Lag: max(0, rev-rep.Seen)})
			}
		} else {
			for _, addr := range g.cfg.CacheNodes {
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

func (g *Gateway) serveStatus(rc *fasthttp.RequestCtx) error {
	ctx, cancel := context.WithTimeout(g.base, 10*time.Second)
	defer cancel()
	st, err := g.status(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("cannot encode status: %w", err)
	}
	rc.SetContentType("application/json")
	rc.SetBody(body)
	return nil
}
