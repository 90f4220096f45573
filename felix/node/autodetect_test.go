package node

import (
	"net/netip"
	"testing"
)

func TestAutodetect(t *testing.T) {
	ifaces := []ifaceAddrs{
		{name: "lo", addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{name: "docker0", addrs: []netip.Prefix{netip.MustParsePrefix("172.17.0.1/16")}},
		{name: "cali12345", addrs: []netip.Prefix{netip.MustParsePrefix("169.254.1.1/32")}},
		{name: "eth0", addrs: []netip.Prefix{netip.MustParsePrefix("fe80::1/64"), netip.MustParsePrefix("10.0.0.5/24"), netip.MustParsePrefix("fd00::5/64")}},
		{name: "eth1", addrs: []netip.Prefix{netip.MustParsePrefix("192.168.7.9/24")}},
	}
	cases := []struct {
		method string
		v6     bool
		want   string
		err    bool
	}{
		{"first-found", false, "10.0.0.5/24", false},
		{"", true, "fd00::5/64", false},
		{"interface=eth1", false, "192.168.7.9/24", false},
		{"interface=eth.*", false, "10.0.0.5/24", false},
		{"interface=wlan0", false, "", true},
		{"cidr=192.168.0.0/16", false, "192.168.7.9/24", false},
		{"cidr=10.9.0.0/16,10.0.0.0/8", false, "10.0.0.5/24", false},
		{"cidr=bogus", false, "", true},
		{"magic", false, "", true},
	}
	for _, c := range cases {
		got, err := autodetect(c.method, c.v6, ifaces)
		if (err != nil) != c.err || (!c.err && got.String() != c.want) {
			t.Errorf("%s (v6=%v) = %v, %v; want %s", c.method, c.v6, got, err, c.want)
		}
	}
}
