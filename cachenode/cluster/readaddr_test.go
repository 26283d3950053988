package cluster

import (
	"net"
	"testing"

	"github.com/hashicorp/memberlist"
)

// A read API listening on every interface is announced where members can
// dial it: at the gossip advertise address, else at a specific bind
// address, else at the host's private IP; a specific one as it is.
func TestReachableReadAddr(t *testing.T) {
	for _, tc := range []struct {
		name, read, bind, advertise string
		want                        string // "" : any non-unspecified host, port kept
	}{
		{"specific", "10.1.2.3:7443", "0.0.0.0", "", "10.1.2.3:7443"},
		{"loopback", "127.0.0.1:7443", "0.0.0.0", "", "127.0.0.1:7443"},
		{"advertise", "0.0.0.0:7443", "0.0.0.0", "10.9.9.9", "10.9.9.9:7443"},
		{"ipv6 any, advertise", "[::]:7443", "0.0.0.0", "fd00::1", "[fd00::1]:7443"},
		{"bind", "0.0.0.0:7443", "10.4.4.4", "", "10.4.4.4:7443"},
		{"empty host, bind", ":7443", "10.4.4.4", "", "10.4.4.4:7443"},
		{"private IP", "0.0.0.0:7443", "0.0.0.0", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := memberlist.DefaultLANConfig()
			mc.BindAddr, mc.AdvertiseAddr = tc.bind, tc.advertise
			got, err := reachableReadAddr(tc.read, mc)
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Errorf("= %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Skipf("this host has no private IP to announce: %v", err)
			}
			host, port, _ := net.SplitHostPort(got)
			if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() || port != "7443" {
				t.Errorf("= %q, want a specific host and port 7443", got)
			}
		})
	}
}
