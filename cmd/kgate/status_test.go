package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kgate/kgate/gateway"
)

func TestPrintStatus(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, &gateway.Status{
		Revision: 42,
		Members:  []gateway.MemberStatus{{Name: "cn-0", Role: "cachenode", Addr: "10.0.0.1:7946", ReadAddr: "10.0.0.1:7443", Since: "2026-01-01T00:00:00Z"}},
		Ranges: []gateway.RangeStatus{
			{ID: "pods-0", Owners: []string{"cn-0", "cn-1"}, Replicas: []gateway.ReplicaStatus{{Node: "cn-0", Primary: true, Lag: 0}, {Node: "cn-1", Lag: 3}}},
			{ID: "leases-1", Owners: []string{"cn-1"}},
		},
	})
	s := out.String()
	for _, want := range []string{"etcd revision 42", "cachenode", "10.0.0.1:7443", "cn-0*(0) cn-1(3)", "leases-1", "NONE"} {
		if !strings.Contains(s, want) {
			t.Errorf("status output lacks %q:\n%s", want, s)
		}
	}
}
