package ipalloc

import (
	"math"
	"net/netip"
	"testing"
)

func TestRange(t *testing.T) {
	f := func(cidr, first, last string, size, band uint64) {
		t.Helper()
		r, err := newRange(netip.MustParsePrefix(cidr))
		if err != nil {
			t.Fatalf("newRange(%s): %v", cidr, err)
		}
		if got := r.first.String(); got != first {
			t.Errorf("%s: first = %s, want %s", cidr, got, first)
		}
		if got := r.at(r.size - 1).String(); got != last {
			t.Errorf("%s: last = %s, want %s", cidr, got, last)
		}
		if r.size != size || r.band != band {
			t.Errorf("%s: size, band = %d, %d, want %d, %d", cidr, r.size, r.band, size, band)
		}
		upper, lower := r.bands()
		if upper.lo == 0 || lower.lo == 0 {
			t.Errorf("%s: bands %v %v include the reserved first address", cidr, upper, lower)
		}
		if upper.hi != r.size || upper.lo != max(lower.hi, 1) {
			t.Errorf("%s: bands %v %v do not cover the range", cidr, upper, lower)
		}
	}
	f("10.96.0.0/12", "10.96.0.1", "10.111.255.254", 1<<20-2, 256)
	f("10.96.0.1/12", "10.96.0.1", "10.111.255.254", 1<<20-2, 256) // masked
	f("10.0.0.0/24", "10.0.0.1", "10.0.0.254", 254, 16)
	f("10.0.0.0/26", "10.0.0.1", "10.0.0.62", 62, 16)
	f("10.0.0.0/28", "10.0.0.1", "10.0.0.14", 14, 0)
	f("10.0.0.0/30", "10.0.0.1", "10.0.0.2", 2, 0)
	f("fd00::/108", "fd00::1", "fd00::f:ffff", 1<<20-1, 256)
	f("fd00::/64", "fd00::1", "fd00::ffff:ffff:ffff:ffff", math.MaxUint64, 256)
	f("fd00::/126", "fd00::1", "fd00::3", 3, 0)

	for _, cidr := range []string{"10.0.0.0/31", "10.0.0.0/32", "fd00::/63", "fd00::/127", "fd00::/128"} {
		if _, err := newRange(netip.MustParsePrefix(cidr)); err == nil {
			t.Errorf("newRange(%s) succeeded, want an error", cidr)
		}
	}
}

func TestRangeContains(t *testing.T) {
	f := func(cidr, ip string, want bool) {
		t.Helper()
		r, err := newRange(netip.MustParsePrefix(cidr))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.contains(netip.MustParseAddr(ip)); got != want {
			t.Errorf("%s contains %s = %v, want %v", cidr, ip, got, want)
		}
	}
	f("10.96.0.0/12", "10.96.0.1", true)
	f("10.96.0.0/12", "10.100.3.4", true)
	f("10.96.0.0/12", "10.111.255.254", true)
	f("10.96.0.0/12", "10.96.0.0", false)        // network
	f("10.96.0.0/12", "10.111.255.255", false)   // broadcast
	f("10.96.0.0/12", "10.112.0.1", false)       // outside
	f("10.96.0.0/12", "::ffff:10.96.0.1", false) // callers unmap first
	f("fd00::/108", "fd00::f:ffff", true)        // IPv6 has no broadcast
	f("fd00::/108", "fd00::", false)
	f("fd00::/108", "10.96.0.1", false)
}
