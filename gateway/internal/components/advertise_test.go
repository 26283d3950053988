package components

import (
	"net"
	"net/netip"
	"testing"
)

// A gateway bound to one address advertises that address (a loopback
// bind is reachable on loopback only); a given address wins; an
// unspecified bind advertises the host's interface.
func TestAdvertised(t *testing.T) {
	lo := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 6443}
	if got, err := advertised(netip.Addr{}, lo); err != nil || got.String() != "127.0.0.1:6443" {
		t.Errorf("loopback bind: %v, %v; want 127.0.0.1:6443", got, err)
	}
	given := netip.MustParseAddr("10.0.0.7")
	if got, err := advertised(given, lo); err != nil || got.String() != "10.0.0.7:6443" {
		t.Errorf("given address: %v, %v; want 10.0.0.7:6443", got, err)
	}
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 6443}
	got, err := advertised(netip.Addr{}, any)
	if err == nil && (got.Addr().IsUnspecified() || got.Port() != 6443) {
		t.Errorf("unspecified bind advertised %v", got)
	}
}
