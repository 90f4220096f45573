package iptables

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIPSetEntry: members in the planner's (canonical) form parse into
// the netlink entry ipset itself would send; anything else is refused, so
// that its group goes through `ipset restore`.
func TestIPSetEntry(t *testing.T) {
	for _, tc := range []struct {
		typ, fam, m string
		ip          string
		cidr        uint8
		proto       uint8
		port        uint16
	}{
		{SetTypeIP, FamilyInet, "10.65.0.5", "10.65.0.5", 0, 0, 0},
		{SetTypeIP, FamilyInet6, "fd00::1", "fd00::1", 0, 0, 0},
		{SetTypeNet, FamilyInet, "10.0.0.0/24", "10.0.0.0", 24, 0, 0},
		{SetTypeNet, FamilyInet, "10.0.0.1", "10.0.0.1", 32, 0, 0},
		{SetTypeNet, FamilyInet6, "fd00::/64", "fd00::", 64, 0, 0},
		{SetTypeNet, FamilyInet6, "fd00::1", "fd00::1", 128, 0, 0},
		{SetTypeIPPort, FamilyInet, "10.65.0.5,tcp:8080", "10.65.0.5", 0, unix.IPPROTO_TCP, 8080},
		{SetTypeIPPort, FamilyInet, "10.65.0.5,udp:53", "10.65.0.5", 0, unix.IPPROTO_UDP, 53},
		{SetTypeIPPort, FamilyInet, "10.65.0.5,sctp:9", "10.65.0.5", 0, unix.IPPROTO_SCTP, 9},
		{SetTypeIPPort, FamilyInet6, "fd00::5,udp:0", "fd00::5", 0, unix.IPPROTO_UDP, 0},
		{SetTypeIPPort, FamilyInet6, "fd00::5,udplite:65535", "fd00::5", 0, unix.IPPROTO_UDPLITE, 65535},
	} {
		e, err := ipsetEntry(tc.typ, tc.fam, tc.m)
		if err != nil {
			t.Errorf("%s %s %q: %v", tc.typ, tc.fam, tc.m, err)
			continue
		}
		wantLen := map[string]int{FamilyInet: 4, FamilyInet6: 16}[tc.fam] // selects the IPv4/IPv6 attribute
		if !e.IP.Equal(net.ParseIP(tc.ip)) || len(e.IP) != wantLen || e.CIDR != tc.cidr || !e.Replace {
			t.Errorf("%s %q: entry %+v, want IP %s (%d bytes) cidr %d, Replace", tc.typ, tc.m, e, tc.ip, wantLen, tc.cidr)
		}
		if (e.Port != nil) != (tc.typ == SetTypeIPPort) || (e.Port != nil && (*e.Port != tc.port || *e.Protocol != tc.proto)) {
			t.Errorf("%s %q: port/protocol %v/%v, want %d/%d", tc.typ, tc.m, e.Port, e.Protocol, tc.port, tc.proto)
		}
	}
	for _, tc := range []struct{ typ, fam, m string }{
		{SetTypeIP, FamilyInet, "10.65.0.5/32"},                    // not as the planner has it
		{SetTypeIP, FamilyInet, "fd00::1"},                         // wrong family
		{SetTypeIP, FamilyInet6, "::ffff:10.0.0.1"},                // mapped
		{SetTypeIP, FamilyInet6, "FD00::1"},                        // not canonical
		{SetTypeNet, FamilyInet, "10.0.0.1/24"},                    // not masked
		{SetTypeNet, FamilyInet, "10.0.0.1/32"},                    // printed bare by ipset
		{SetTypeIPPort, FamilyInet, "10.65.0.5,8080"},              // protocol left out
		{SetTypeIPPort, FamilyInet, "10.65.0.1,icmp:echo-request"}, // kept verbatim from a read-back
		{SetTypeIPPort, FamilyInet, "10.65.0.1,tcp:080"},
		{SetTypeIP, FamilyInet, "bogus"},
		{"hash:mac", FamilyInet, "00:00:00:00:00:01"},
	} {
		if e, err := ipsetEntry(tc.typ, tc.fam, tc.m); err == nil {
			t.Errorf("%s %s %q: got %+v, want it refused (to ipset restore)", tc.typ, tc.fam, tc.m, e)
		}
	}
}
