package ipalloc

import (
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
)

// Sizes of the lower band of a range kept for static allocation
// (KEP-3070): min(max(minBand, size/bandStep), maxBand), none for ranges of
// at most minBand addresses.
const (
	minBand  = 16
	maxBand  = 256
	bandStep = 16
)

// ipRange is the allocatable addresses of a service CIDR: all but the
// network address and, for IPv4, the broadcast address. Addresses are
// numbered by their offset from first.
type ipRange struct {
	first netip.Addr // network address + 1, reserved for the kubernetes Service
	size  uint64     // number of allocatable addresses, capped at MaxUint64
	band  uint64     // size of the lower band
}

// band is the offsets [lo, hi) of part of a range.
type band struct{ lo, hi uint64 }

func (b band) size() uint64 { return b.hi - b.lo }

func newRange(p netip.Prefix) (ipRange, error) {
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	if p.Addr().Is6() && hostBits > 64 {
		return ipRange{}, errors.New("an IPv6 service CIDR must be at least a /64")
	}
	var cidrSize, size uint64
	if hostBits >= 64 {
		cidrSize, size = math.MaxUint64, math.MaxUint64
	} else {
		cidrSize = 1 << hostBits
		size = cidrSize - 1 // the network address
		if p.Addr().Is4() && size > 0 {
			size-- // the broadcast address
		}
	}
	if size < 2 {
		return ipRange{}, errors.New("the range holds no allocatable address besides the reserved first one")
	}
	r := ipRange{first: p.Addr().Next(), size: size}
	if cidrSize > minBand {
		r.band = min(max(minBand, cidrSize/bandStep), maxBand)
	}
	return r, nil
}

// bands returns the upper band, where dynamic allocation looks first, and
// the lower band without the reserved first address.
func (r ipRange) bands() (upper, lower band) {
	return band{lo: max(r.band, 1), hi: r.size}, band{lo: 1, hi: max(r.band, 1)}
}

// at returns the address at offset off.
func (r ipRange) at(off uint64) netip.Addr {
	b := r.first.As16()
	lo := binary.BigEndian.Uint64(b[8:])
	hi := binary.BigEndian.Uint64(b[:8])
	sum := lo + off
	if sum < lo {
		hi++
	}
	binary.BigEndian.PutUint64(b[8:], sum)
	binary.BigEndian.PutUint64(b[:8], hi)
	addr := netip.AddrFrom16(b)
	if r.first.Is4() {
		return addr.Unmap()
	}
	return addr
}

// contains reports whether addr is an allocatable address of the range,
// the reserved first one included.
func (r ipRange) contains(addr netip.Addr) bool {
	if addr.Is4() != r.first.Is4() || addr.Less(r.first) {
		return false
	}
	return !r.at(r.size - 1).Less(addr)
}
