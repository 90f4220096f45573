package routes

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/iptables"
)

// Routes learned over BGP inside a VXLAN pool are not programmed (the
// overlay's are); outside it they are; local routes win over both.
func TestAddOverlayBGPRoutes(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	ov := calc.OverlayDesired{
		V4: calc.OverlayFamily{
			Enabled:    true,
			Device:     calc.VXLANDeviceConfig{Name: "vxlan.calico", VNI: 4096, Port: 4789, Addr: addr("10.65.0.1"), MAC: "66:00:00:00:00:01", Parent: addr("10.0.1.1")},
			VTEPs:      []calc.VTEP{{Node: "n2", Addr: addr("10.65.0.65"), MAC: "66:00:00:00:00:02", NodeIP: addr("10.0.2.2")}},
			EncapPools: []netip.Prefix{pfx("10.65.0.0/16")},
		},
		V6: calc.OverlayFamily{Enabled: true, EncapPools: []netip.Prefix{pfx("fd00:65::/64")}},
		Routes: map[netip.Prefix]calc.OverlayRoute{
			pfx("fd00:65::40/122"): {Via: addr("fd00:65::41"), Tunnel: true},
			pfx("10.65.0.64/26"):   {Via: addr("10.65.0.65"), Tunnel: true},
			pfx("10.65.0.128/26"):  {Via: addr("10.0.1.3")},
			pfx("10.65.0.5/32"):    {Via: addr("10.65.0.65"), Tunnel: true}, // but a local pod has it
		},
	}
	des := dataplane.Desired{Routes: map[netip.Prefix]dataplane.RouteTarget{pfx("10.65.0.5/32"): {Iface: "cali1"}}}
	learned := map[netip.Prefix]dataplane.RouteTarget{
		pfx("10.65.0.64/26"):   {Via: []netip.Addr{addr("10.0.2.2")}},
		pfx("10.65.0.192/26"):  {Via: []netip.Addr{addr("10.0.2.4")}},
		pfx("10.70.0.0/26"):    {Via: []netip.Addr{addr("10.0.2.4")}},
		pfx("fd00:65::80/122"): {Via: []netip.Addr{addr("fd51::4")}},
	}
	AddOverlay(&des, ov, learned, nil)
	want := map[string]string{
		"10.65.0.5/32":    "dev cali1",
		"10.65.0.64/26":   "via 10.65.0.65 dev vxlan.calico onlink",
		"10.65.0.128/26":  "via 10.0.1.3",
		"10.70.0.0/26":    "via 10.0.2.4",
		"fd00:65::40/122": "via fd00:65::41 dev vxlan-v6.calico onlink",
	}
	if len(des.Routes) != len(want) {
		t.Errorf("routes %v, want %v", des.Routes, want)
	}
	for p, w := range want {
		if got := des.Routes[pfx(p)].String(); got != w {
			t.Errorf("route %s: %q, want %q", p, got, w)
		}
	}
	if d := des.VXLAN.Device; d == nil || d.Name != "vxlan.calico" || d.Addr != addr("10.65.0.1") || len(des.VXLAN.Peers) != 1 {
		t.Errorf("device %+v peers %v", d, des.VXLAN.Peers)
	}
}

// With VXLAN on, the IP set of node addresses exists and cali-INPUT first
// accepts the VXLAN port from it and drops it from others; the rendered
// chains are not changed in place. With VXLAN off, nothing is added.
func TestVXLANInputFilter(t *testing.T) {
	rendered := []iptables.Chain{{Name: "cali-INPUT", Rules: []iptables.Rule{{Match: "-i cali+", Action: "-g cali-wl-to-host"}}},
		{Name: "cali-OUTPUT"}, {Name: "cali-FORWARD"}}
	orig := fmt.Sprint(rendered)
	mk := func() dataplane.Desired {
		return dataplane.Desired{IPSets: map[string]dataplane.IPSet{}, Routes: map[netip.Prefix]dataplane.RouteTarget{},
			Tables: map[int]map[string][]iptables.Chain{4: {"filter": rendered}}}
	}
	ov := calc.OverlayDesired{Port: 4790, V4: calc.OverlayFamily{Enabled: true,
		NodeAddrs: []netip.Addr{netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.3")}}}
	des := mk()
	AddOverlay(&des, ov, nil, nil)
	if got := des.IPSets["cali40all-vxlan-net"]; fmt.Sprint(got.Members) != "[10.0.1.1/32 10.0.2.3/32]" || got.Type != "hash:net" {
		t.Errorf("node set %+v", got)
	}
	in := des.Tables[4]["filter"][0]
	want := []string{
		"-p udp -m udp --dport 4790 -m set --match-set cali40all-vxlan-net src -m addrtype --dst-type LOCAL -j ACCEPT",
		"-p udp -m udp --dport 4790 -m addrtype --dst-type LOCAL -j DROP",
		"-i cali+ -g cali-wl-to-host",
	}
	expectRules(t, "cali-INPUT", in.Rules, want)
	if out := des.Tables[4]["filter"][1]; len(out.Rules) != 1 || out.Rules[0].Action != "-j ACCEPT" {
		t.Errorf("cali-OUTPUT %v", out.Rules)
	}
	if fmt.Sprint(rendered) != orig {
		t.Errorf("the rendered chains were changed in place: %v", rendered)
	}
	ov.V4.Enabled = false
	des = mk()
	AddOverlay(&des, ov, nil, nil)
	if _, ok := des.IPSets["cali40all-vxlan-net"]; ok || len(des.Tables[4]["filter"][0].Rules) != 1 {
		t.Errorf("VXLAN off, yet set %v, cali-INPUT %v", des.IPSets, des.Tables[4]["filter"][0].Rules)
	}
}

// expectRules checks a chain's rules, as "match action" lines, against want.
func expectRules(t *testing.T, chain string, rules []iptables.Rule, want []string) {
	t.Helper()
	if len(rules) != len(want) {
		t.Fatalf("%s %v", chain, rules)
	}
	for i, r := range rules {
		if got := r.Match + " " + r.Action; got != want[i] {
			t.Errorf("%s rule %d: %q, want %q", chain, i, got, want[i])
		}
	}
}
