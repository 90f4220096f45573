package routes

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/iptables"
)

// Routes learned over BGP inside an IPIP pool go over tunl0 onlink via
// the remote node's address (CrossSubnet: only next hops outside this
// node's subnet) and keep BGP's protocol; others stay as learned; local
// routes win; tunl0 is desired with the tunnel address and ipipMTU; a
// direct CrossSubnet VXLAN route carries the agent's protocol.
func TestAddIPIPRoutes(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	ov := calc.OverlayDesired{
		IPIP: calc.IPIPDesired{Enabled: true, Addr: addr("10.66.0.1"), MTU: 1430, Parent: addr("10.0.1.1"),
			Subnet: pfx("10.0.1.0/24"), NodeAddrs: []netip.Addr{addr("10.0.1.1"), addr("10.0.1.2"), addr("10.0.2.3")},
			Pools: []calc.IPIPPool{{Prefix: pfx("10.66.0.0/16")}, {Prefix: pfx("10.67.0.0/16"), CrossSubnet: true}}},
		V4:     calc.OverlayFamily{Enabled: true, EncapPools: []netip.Prefix{pfx("10.65.0.0/16")}},
		Routes: map[netip.Prefix]calc.OverlayRoute{pfx("10.65.0.128/26"): {Via: addr("10.0.1.3")}},
	}
	des := dataplane.Desired{Routes: map[netip.Prefix]dataplane.RouteTarget{
		pfx("10.66.0.5/32"): {Iface: "cali1"}, pfx("10.66.0.0/26"): {Blackhole: true}}}
	via := func(a string) dataplane.RouteTarget { return dataplane.RouteTarget{Via: []netip.Addr{addr(a)}} }
	learned := map[netip.Prefix]dataplane.RouteTarget{
		pfx("10.66.0.0/26"):   via("10.0.1.2"), // our own block: the blackhole wins
		pfx("10.66.0.5/32"):   via("10.0.1.2"), // a local pod
		pfx("10.66.0.64/26"):  via("10.0.1.2"),
		pfx("10.67.0.64/26"):  via("10.0.1.2"),
		pfx("10.67.0.128/26"): via("10.0.2.3"),
		pfx("10.70.0.0/26"):   via("10.0.2.3"),
	}
	AddOverlay(&des, ov, learned, nil)
	want := map[string]string{
		"10.66.0.0/26":   "blackhole",
		"10.66.0.5/32":   "dev cali1",
		"10.66.0.64/26":  "via 10.0.1.2 dev tunl0 onlink",
		"10.67.0.64/26":  "via 10.0.1.2",
		"10.67.0.128/26": "via 10.0.2.3 dev tunl0 onlink",
		"10.70.0.0/26":   "via 10.0.2.3",
		"10.65.0.128/26": "via 10.0.1.3",
	}
	if len(des.Routes) != len(want) {
		t.Errorf("routes %v, want %v", des.Routes, want)
	}
	for p, w := range want {
		if got := des.Routes[pfx(p)].String(); got != w {
			t.Errorf("route %s: %q, want %q", p, got, w)
		}
	}
	if r := des.Routes[pfx("10.66.0.64/26")]; r.Proto != 81 {
		t.Errorf("IPIP route from BGP: protocol %d, want BGP's 81", r.Proto)
	}
	if r := des.Routes[pfx("10.65.0.128/26")]; r.Proto != 80 {
		t.Errorf("direct CrossSubnet VXLAN route: protocol %d, want the agent's 80", r.Proto)
	}
	if d := des.IPIP; d == nil || *d != (dataplane.IPIPDevice{Name: "tunl0", MTU: 1430, Addr: addr("10.66.0.1"), Parent: addr("10.0.1.1")}) {
		t.Errorf("tunl0 desired %+v", d)
	}
	// IP-in-IP off: no device, learned routes as they are.
	ov.IPIP.Enabled = false
	des = dataplane.Desired{Routes: map[netip.Prefix]dataplane.RouteTarget{}}
	AddOverlay(&des, ov, learned, nil)
	if des.IPIP != nil || des.Routes[pfx("10.66.0.64/26")].String() != "via 10.0.1.2" {
		t.Errorf("IPIP off: device %v, route %v", des.IPIP, des.Routes[pfx("10.66.0.64/26")])
	}
}

// With IP-in-IP on, cali40all-hosts-net holds every node's address and
// cali-INPUT first accepts protocol 4 from it and drops it from others,
// cali-OUTPUT accepts it to them; with it off, nothing is added.
func TestIPIPInputFilter(t *testing.T) {
	rendered := []iptables.Chain{{Name: "cali-INPUT", Rules: []iptables.Rule{{Match: "-i cali+", Action: "-g cali-wl-to-host"}}},
		{Name: "cali-OUTPUT"}, {Name: "cali-FORWARD"}}
	orig := fmt.Sprint(rendered)
	mk := func() dataplane.Desired {
		return dataplane.Desired{IPSets: map[string]dataplane.IPSet{}, Routes: map[netip.Prefix]dataplane.RouteTarget{},
			Tables: map[int]map[string][]iptables.Chain{4: {"filter": rendered}}}
	}
	ov := calc.OverlayDesired{IPIP: calc.IPIPDesired{Enabled: true,
		NodeAddrs: []netip.Addr{netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.3")}}}
	des := mk()
	AddOverlay(&des, ov, nil, nil)
	if got := des.IPSets["cali40all-hosts-net"]; fmt.Sprint(got.Members) != "[10.0.1.1/32 10.0.2.3/32]" || got.Family != "inet" {
		t.Errorf("node set %+v", got)
	}
	want := []string{
		"-p 4 -m set --match-set cali40all-hosts-net src -m addrtype --dst-type LOCAL -j ACCEPT",
		"-p 4 -j DROP",
		"-i cali+ -g cali-wl-to-host",
	}
	in := des.Tables[4]["filter"][0]
	expectRules(t, "cali-INPUT", in.Rules, want)
	if out := des.Tables[4]["filter"][1]; len(out.Rules) != 1 || out.Rules[0].Match != "-p 4 -m set --match-set cali40all-hosts-net dst -m addrtype --src-type LOCAL" {
		t.Errorf("cali-OUTPUT %v", out.Rules)
	}
	if fmt.Sprint(rendered) != orig {
		t.Errorf("the rendered chains were changed in place: %v", rendered)
	}
	ov.IPIP.Enabled = false
	des = mk()
	AddOverlay(&des, ov, nil, nil)
	if _, ok := des.IPSets["cali40all-hosts-net"]; ok || len(des.Tables[4]["filter"][0].Rules) != 1 {
		t.Errorf("IPIP off, yet set %v, cali-INPUT %v", des.IPSets, des.Tables[4]["filter"][0].Rules)
	}
}
