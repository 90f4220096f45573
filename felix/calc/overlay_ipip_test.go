package calc_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

func ipipNode(name, addr, tunnel string) *api.Node {
	n := overlayNode(name, addr, "", "")
	n.Spec.BGP.IPv4IPIPTunnelAddr = tunnel
	return n
}

func ipipPool(name, cidr string, mode api.IPIPMode) *api.IPPool {
	p := pool(name, cidr, false)
	p.Spec.IPIPMode = mode
	return p
}

// renderIPIP renders the IP-in-IP desired state of ds (fed in a shuffled
// order) and how each of a fixed set of BGP routes would be installed.
func renderIPIP(t *testing.T, ds datastore, seed uint64) string {
	t.Helper()
	o := calc.NewOverlay(thisNode)
	keys := sortedKeys(ds)
	rand.New(rand.NewPCG(seed, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		o.Apply(decode(t, k, ds[k]))
	}
	d := o.Desired().IPIP
	var b strings.Builder
	fmt.Fprintf(&b, "enabled %v addr %v mtu %d parent %v subnet %v pools %v nodes %v\n",
		d.Enabled, d.Addr, d.MTU, d.Parent, d.Subnet, d.Pools, d.NodeAddrs)
	for _, r := range []struct{ dst, via string }{
		{"10.66.0.64/26", "10.0.1.2"},           // same subnet
		{"10.66.0.128/26", "10.0.2.3"},          // other subnet
		{"10.66.0.7/32", "10.0.2.3"},            // borrowed address
		{"10.66.0.192/26", "10.0.2.4,10.0.1.2"}, // ECMP across subnets
		{"10.70.0.0/26", "10.0.2.3"},            // not an IPIP pool
	} {
		var via []netip.Addr
		for _, v := range strings.Split(r.via, ",") {
			via = append(via, netip.MustParseAddr(v))
		}
		if next, tunnel := d.IPIPRoute(netip.MustParsePrefix(r.dst), via); tunnel {
			fmt.Fprintf(&b, "%s via %s dev tunl0 onlink\n", r.dst, next)
		} else {
			fmt.Fprintf(&b, "%s as learned\n", r.dst)
		}
	}
	return b.String()
}

func checkIPIP(t *testing.T, ds datastore, want string) {
	t.Helper()
	for seed := uint64(0); seed < 4; seed++ {
		if got := renderIPIP(t, ds, seed); got != want {
			t.Fatalf("order %d:\n%s", seed, textDiff(got, want))
		}
	}
}

// IP-in-IP desired state: tunl0 with this node's tunnel address while an
// IPv4 pool has ipipMode on (or ipipEnabled says so; ipipEnabled false
// wins), ipipMTU, every node's address for the filter, and BGP routes
// inside IPIP pools over tunl0: Always all of them, CrossSubnet only next
// hops outside this node's subnet, re-decided when this node moves.
func TestOverlayIPIP(t *testing.T) {
	ds := datastore{}
	ds.put(t, ipipPool("p", "10.66.0.0/16", api.IPIPModeAlways))
	ds.put(t, pool("flat", "10.70.0.0/16", false))
	ds.put(t, ipipNode(thisNode, "10.0.1.1/24", "10.66.0.1"))
	ds.put(t, ipipNode("node2", "10.0.1.2/24", "10.66.0.65"))
	ds.put(t, ipipNode("node3", "10.0.2.3/24", "10.66.0.129"))
	nodes := "nodes [10.0.1.1 10.0.1.2 10.0.2.3]\n"
	checkIPIP(t, ds, `enabled true addr 10.66.0.1 mtu 0 parent 10.0.1.1 subnet 10.0.1.0/24 pools [{10.66.0.0/16 false}] `+nodes+
		`10.66.0.64/26 via 10.0.1.2 dev tunl0 onlink
10.66.0.128/26 via 10.0.2.3 dev tunl0 onlink
10.66.0.7/32 via 10.0.2.3 dev tunl0 onlink
10.66.0.192/26 via 10.0.1.2 dev tunl0 onlink
10.70.0.0/26 as learned
`)
	ds.put(t, ipipPool("p", "10.66.0.0/16", api.IPIPModeCrossSubnet))
	cross := `enabled true addr 10.66.0.1 mtu 0 parent 10.0.1.1 subnet 10.0.1.0/24 pools [{10.66.0.0/16 true}] ` + nodes +
		`10.66.0.64/26 as learned
10.66.0.128/26 via 10.0.2.3 dev tunl0 onlink
10.66.0.7/32 via 10.0.2.3 dev tunl0 onlink
10.66.0.192/26 via 10.0.1.2 dev tunl0 onlink
10.70.0.0/26 as learned
`
	checkIPIP(t, ds, cross)
	// This node moves to node3's subnet: the decision follows.
	ds.put(t, ipipNode(thisNode, "10.0.2.1/24", "10.66.0.1"))
	checkIPIP(t, ds, `enabled true addr 10.66.0.1 mtu 0 parent 10.0.2.1 subnet 10.0.2.0/24 pools [{10.66.0.0/16 true}] nodes [10.0.1.2 10.0.2.1 10.0.2.3]
10.66.0.64/26 via 10.0.1.2 dev tunl0 onlink
10.66.0.128/26 as learned
10.66.0.7/32 as learned
10.66.0.192/26 via 10.0.1.2 dev tunl0 onlink
10.70.0.0/26 as learned
`)
	ds.put(t, ipipNode(thisNode, "10.0.1.1/24", "10.66.0.1"))

	// FelixConfiguration: ipipMTU (node overlay), ipipEnabled false wins.
	mtu, off, on := 1430, false, true
	nc := newObj("FelixConfiguration").(*api.FelixConfiguration)
	nc.Metadata.Name = "node." + thisNode
	nc.Spec.IPIPMTU = &mtu
	ds.put(t, nc)
	checkIPIP(t, ds, strings.Replace(cross, "mtu 0", "mtu 1430", 1))
	fc := newObj("FelixConfiguration").(*api.FelixConfiguration)
	fc.Metadata.Name = "default"
	fc.Spec.IPIPEnabled = &off
	ds.put(t, fc)
	offText := "enabled false addr invalid IP mtu 0 parent invalid IP subnet invalid Prefix pools [] " + nodes +
		"10.66.0.64/26 as learned\n10.66.0.128/26 as learned\n10.66.0.7/32 as learned\n10.66.0.192/26 as learned\n10.70.0.0/26 as learned\n"
	checkIPIP(t, ds, offText)
	// No IPIP pool: off; ipipEnabled true: tunl0 without routes.
	ds.remove("FelixConfiguration", "", "default")
	ds.put(t, ipipPool("p", "10.66.0.0/16", api.IPIPModeNever))
	checkIPIP(t, ds, offText)
	fc.Spec.IPIPEnabled = &on
	ds.put(t, fc)
	checkIPIP(t, ds, "enabled true addr 10.66.0.1 mtu 1430 parent 10.0.1.1 subnet 10.0.1.0/24 pools [] "+nodes+
		"10.66.0.64/26 as learned\n10.66.0.128/26 as learned\n10.66.0.7/32 as learned\n10.66.0.192/26 as learned\n10.70.0.0/26 as learned\n")
}
