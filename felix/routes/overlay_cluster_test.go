package routes

import (
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// The agent's cluster routes (FelixConfiguration programClusterRoutes
// Enabled) are programmed with the agent's protocol, over tunl0 onlink in
// IP-in-IP pools, onlink on the interface holding this node's address in
// the others, and win over a route learned for the same destination;
// with BGPConfiguration programClusterRoutes Disabled, learned routes in
// those pools are dropped while others stay.
func TestAddOverlayClusterRoutes(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	ov := calc.OverlayDesired{
		IPIP: calc.IPIPDesired{Enabled: true, Addr: addr("10.66.0.1"), Parent: addr("10.0.1.1"),
			Subnet: pfx("10.0.1.0/24"), Pools: []calc.IPIPPool{{Prefix: pfx("10.66.0.0/16")}}},
		Routes: map[netip.Prefix]calc.OverlayRoute{
			pfx("10.66.0.64/26"): {Via: addr("10.0.1.2"), IPIP: true},
			pfx("10.70.0.64/26"): {Via: addr("10.0.1.2"), Parent: true},
		},
		Parent4: addr("10.0.1.1"),
	}
	parents := map[netip.Addr]string{addr("10.0.1.1"): "eth0"}
	via := func(a string) dataplane.RouteTarget { return dataplane.RouteTarget{Via: []netip.Addr{addr(a)}} }
	learned := map[netip.Prefix]dataplane.RouteTarget{
		pfx("10.66.0.64/26"):  via("10.0.1.9"), // the agent's own route wins
		pfx("10.70.0.128/26"): via("10.0.2.3"), // not computed here (say, no Node yet)
		pfx("10.80.0.0/26"):   via("10.0.2.3"), // outside every pool
	}
	check := func(name string, want map[string]string) {
		t.Helper()
		des := dataplane.Desired{Routes: map[netip.Prefix]dataplane.RouteTarget{}}
		AddOverlay(&des, ov, learned, parents)
		if len(des.Routes) != len(want) {
			t.Errorf("%s: routes %v, want %v", name, des.Routes, want)
		}
		for p, w := range want {
			r, ok := des.Routes[pfx(p)]
			if !ok || r.String() != w {
				t.Errorf("%s: route %s: %q, want %q", name, p, r.String(), w)
			}
		}
	}
	check("bgp Enabled", map[string]string{
		"10.66.0.64/26":  "via 10.0.1.2 dev tunl0 onlink",
		"10.70.0.64/26":  "via 10.0.1.2 dev eth0 onlink",
		"10.70.0.128/26": "via 10.0.2.3",
		"10.80.0.0/26":   "via 10.0.2.3",
	})
	ov.BGPRejected = []netip.Prefix{pfx("10.66.0.0/16"), pfx("10.70.0.0/16")}
	check("bgp Disabled", map[string]string{
		"10.66.0.64/26": "via 10.0.1.2 dev tunl0 onlink",
		"10.70.0.64/26": "via 10.0.1.2 dev eth0 onlink",
		"10.80.0.0/26":  "via 10.0.2.3",
	})
	parents = nil // no interface holds this node's address: no device
	check("no parent", map[string]string{
		"10.66.0.64/26": "via 10.0.1.2 dev tunl0 onlink",
		"10.70.0.64/26": "via 10.0.1.2",
		"10.80.0.0/26":  "via 10.0.2.3",
	})
	des := dataplane.Desired{Routes: map[netip.Prefix]dataplane.RouteTarget{}}
	AddOverlay(&des, ov, learned, parents)
	for _, p := range []string{"10.66.0.64/26", "10.70.0.64/26"} {
		if r := des.Routes[pfx(p)]; r.Proto != rtproto.Workload {
			t.Errorf("cluster route %s: protocol %d, want the agent's %d", p, r.Proto, rtproto.Workload)
		}
	}
}
