package clusterstatus

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kgate/kgate/cachenode/cluster"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

type revisions struct {
	rev int64
	err error
}

func (r revisions) Current(context.Context) (int64, error) { return r.rev, r.err }

type members []cluster.Member

func (m members) Members() []cluster.Member { return m }

func TestBuild(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	table, err := ranges.Default(reg)
	if err != nil {
		t.Fatal(err)
	}
	ms := members{
		{Name: "cn-0", Role: cluster.RoleCacheNode, Addr: "10.0.0.1:7946", ReadAddr: "10.0.0.1:7443"},
		{Name: "gw-0", Role: cluster.RoleGateway, Addr: "10.0.0.2:7946"},
	}
	st, err := Build(context.Background(), Sources{
		Revisions: revisions{rev: 42}, Members: ms, Ranges: table, CacheNodes: []string{"10.0.0.1:7443"}, Replicas: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Revision != 42 || len(st.Members) != 2 || st.Members[0].Since != "1970-01-01T00:00:00Z" {
		t.Fatalf("status %+v", st)
	}
	if len(st.Ranges) != len(table.All()) || !slices.IsSortedFunc(st.Ranges, func(a, b RangeStatus) int { return strings.Compare(a.Start, b.Start) }) {
		t.Fatalf("ranges %+v, want every range by start key", st.Ranges)
	}
	for _, r := range st.Ranges {
		// Only cache nodes own ranges; the fixed cache node serves each.
		if len(r.Owners) != 1 || r.Owners[0] != "cn-0" || len(r.Replicas) != 1 || r.Replicas[0].Node != "10.0.0.1:7443" {
			t.Fatalf("range %+v", r)
		}
	}
	if _, err := Build(context.Background(), Sources{Revisions: revisions{err: errors.New("etcd down")}, Ranges: table}); err == nil {
		t.Fatal("built a status without etcd's revision")
	}
}
