package calc_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

func overlayNode(name, addr, tunnel, mac string) *api.Node {
	n := newObj("Node").(*api.Node)
	n.Metadata.Name = name
	n.Spec.BGP = &api.NodeBGPSpec{IPv4Address: addr}
	n.Spec.IPv4VXLANTunnelAddr, n.Spec.VXLANTunnelMACAddr = tunnel, mac
	return n
}

func vxlanPool(name, cidr string, mode api.VXLANMode) *api.IPPool {
	p := pool(name, cidr, false)
	p.Spec.VXLANMode = mode
	return p
}

// overlayFor feeds a datastore to a fresh Overlay in a random order and
// renders the result.
func overlayFor(t *testing.T, ds datastore, seed uint64) string {
	t.Helper()
	o := calc.NewOverlay(thisNode)
	keys := sortedKeys(ds)
	rand.New(rand.NewPCG(seed, 1)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		o.Apply(decode(t, k, ds[k]))
	}
	return renderOverlay(o.Desired())
}

func renderOverlay(d calc.OverlayDesired) string {
	var b strings.Builder
	family := func(f calc.OverlayFamily, routes bool) {
		fmt.Fprintf(&b, "enabled %v\n", f.Enabled)
		if f.Device.Addr.IsValid() {
			dv := f.Device
			fmt.Fprintf(&b, "device vni %d port %d mtu %d addr %s mac %s parent %s\n", dv.VNI, dv.Port, dv.MTU, dv.Addr, dv.MAC, dv.Parent)
		}
		for _, v := range f.VTEPs {
			fmt.Fprintf(&b, "vtep %s %s %s %s\n", v.Node, v.Addr, v.MAC, v.NodeIP)
		}
		if routes {
			var rs []string
			for p, r := range d.Routes {
				how := "via " + r.Via.String()
				if r.Tunnel {
					how += " dev vxlan onlink"
				}
				rs = append(rs, fmt.Sprintf("route %s %s\n", p, how))
			}
			slices.Sort(rs)
			b.WriteString(strings.Join(rs, ""))
		}
		fmt.Fprintf(&b, "encap %v nodes %v\n", f.EncapPools, f.NodeAddrs)
	}
	family(d.V4, true)
	if d.V6.Enabled || len(d.V6.NodeAddrs) > 0 {
		b.WriteString("v6 ")
		family(d.V6, false)
	}
	return b.String()
}

// checkOverlay compares the overlay of ds, fed in several orders, with want.
func checkOverlay(t *testing.T, ds datastore, want string) {
	t.Helper()
	for seed := uint64(0); seed < 4; seed++ {
		if got := overlayFor(t, ds, seed); got != want {
			t.Fatalf("order %d:\n%s", seed, textDiff(got, want))
		}
	}
}

// borrow records in a stored block an address allocated by another node.
func borrow(t *testing.T, ds datastore, cidr string, ord int, node string) {
	t.Helper()
	p := netip.MustParsePrefix(cidr)
	b, err := ipam.ParseBlock(ds[etcdv3.BlockKey(p)])
	if err != nil {
		t.Fatal(err)
	}
	for len(b.Allocations) <= ord {
		b.Allocations = append(b.Allocations, nil)
	}
	i := len(b.Attributes)
	b.Attributes = append(b.Attributes, ipam.AllocationAttributes{Secondary: map[string]string{ipam.AttrNode: node}})
	b.Allocations[ord] = &i
	v, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	ds[etcdv3.BlockKey(p)] = v
}

func twoSubnetDatastore(t *testing.T, mode api.VXLANMode) datastore {
	ds := datastore{}
	ds.put(t, vxlanPool("p", "10.65.0.0/16", mode))
	ds.put(t, pool("flat", "10.70.0.0/16", false))
	ds.put(t, overlayNode(thisNode, "10.0.1.1/24", "10.65.0.1", ""))
	ds.put(t, overlayNode("node2", "10.0.1.2/24", "10.65.0.65", "66:00:00:00:00:02"))
	ds.put(t, overlayNode("node3", "10.0.2.3/24", "10.65.0.129", "66:00:00:00:00:03"))
	ds.put(t, overlayNode("node4", "10.0.2.4/24", "", "")) // no tunnel address yet
	ds.block(t, "10.65.0.0/26", thisNode)
	ds.block(t, "10.65.0.64/26", "node2")
	ds.block(t, "10.65.0.128/26", "node3")
	ds.block(t, "10.65.0.192/26", "node4")
	ds.block(t, "10.70.0.0/26", "node2") // not encapsulated: BGP's
	return ds
}

func TestOverlayDesiredAlways(t *testing.T) {
	ds := twoSubnetDatastore(t, api.VXLANModeAlways)
	myMAC := calc.DerivedVTEPMAC(thisNode)
	checkOverlay(t, ds, `enabled true
device vni 4096 port 4789 mtu 0 addr 10.65.0.1 mac `+myMAC+` parent 10.0.1.1
vtep node2 10.65.0.65 66:00:00:00:00:02 10.0.1.2
vtep node3 10.65.0.129 66:00:00:00:00:03 10.0.2.3
route 10.65.0.128/26 via 10.65.0.129 dev vxlan onlink
route 10.65.0.64/26 via 10.65.0.65 dev vxlan onlink
encap [10.65.0.0/16] nodes [10.0.1.1 10.0.1.2 10.0.2.3 10.0.2.4]
`)
	// A block moving to node3, a node getting its tunnel address, a
	// node deleted: the routes follow, also in an overlay fed only the
	// changes.
	inc := calc.NewOverlay(thisNode)
	applyAllOverlay(inc, diff(t, datastore{}, ds))
	before := ds.clone()
	ds.block(t, "10.65.0.64/26", "node3")
	ds.remove("Node", "", "node2")
	ds.put(t, overlayNode("node4", "10.0.2.4/24", "10.65.0.193", ""))
	applyAllOverlay(inc, diff(t, before, ds))
	if got, want := renderOverlay(inc.Desired()), overlayFor(t, ds, 0); got != want {
		t.Fatalf("incremental differs from fresh:\n%s", textDiff(got, want))
	}
	checkOverlay(t, ds, `enabled true
device vni 4096 port 4789 mtu 0 addr 10.65.0.1 mac `+myMAC+` parent 10.0.1.1
vtep node3 10.65.0.129 66:00:00:00:00:03 10.0.2.3
vtep node4 10.65.0.193 `+calc.DerivedVTEPMAC("node4")+` 10.0.2.4
route 10.65.0.128/26 via 10.65.0.129 dev vxlan onlink
route 10.65.0.192/26 via 10.65.0.193 dev vxlan onlink
route 10.65.0.64/26 via 10.65.0.129 dev vxlan onlink
encap [10.65.0.0/16] nodes [10.0.1.1 10.0.2.3 10.0.2.4]
`)
}

func TestOverlayCrossSubnet(t *testing.T) {
	ds := twoSubnetDatastore(t, api.VXLANModeCrossSubnet)
	// node3 holds an address of node2's block; node2 one of ours.
	borrow(t, ds, "10.65.0.64/26", 5, "node3")
	borrow(t, ds, "10.65.0.0/26", 7, "node2")
	borrow(t, ds, "10.65.0.0/26", 8, thisNode)
	want := func(node3 string) string {
		return `enabled true
device vni 4096 port 4789 mtu 0 addr 10.65.0.1 mac ` + calc.DerivedVTEPMAC(thisNode) + ` parent 10.0.1.1
vtep node2 10.65.0.65 66:00:00:00:00:02 10.0.1.2
vtep node3 10.65.0.129 66:00:00:00:00:03 ` + node3 + `
`
	}
	checkOverlay(t, ds, want("10.0.2.3")+`route 10.65.0.128/26 via 10.65.0.129 dev vxlan onlink
route 10.65.0.64/26 via 10.0.1.2
route 10.65.0.69/32 via 10.65.0.129 dev vxlan onlink
route 10.65.0.7/32 via 10.0.1.2
encap [10.65.0.0/16] nodes [10.0.1.1 10.0.1.2 10.0.2.3 10.0.2.4]
`)
	// node3 moves into our subnet: its routes go direct.
	ds.put(t, overlayNode("node3", "10.0.1.3/24", "10.65.0.129", "66:00:00:00:00:03"))
	checkOverlay(t, ds, want("10.0.1.3")+`route 10.65.0.128/26 via 10.0.1.3
route 10.65.0.64/26 via 10.0.1.2
route 10.65.0.69/32 via 10.0.1.3
route 10.65.0.7/32 via 10.0.1.2
encap [10.65.0.0/16] nodes [10.0.1.1 10.0.1.2 10.0.1.3 10.0.2.4]
`)
}

func TestOverlayFelixConfig(t *testing.T) {
	ds := twoSubnetDatastore(t, api.VXLANModeNever)
	checkOverlay(t, ds, "enabled false\nencap [] nodes [10.0.1.1 10.0.1.2 10.0.2.3 10.0.2.4]\n")
	// vxlanEnabled true with no encapsulating pool: the device, no routes.
	on, vni, port, mtu := true, 4097, 4790, 1400
	fc := newObj("FelixConfiguration").(*api.FelixConfiguration)
	fc.Metadata.Name = "default"
	fc.Spec.VXLANEnabled, fc.Spec.VXLANVNI, fc.Spec.VXLANPort = &on, &vni, &port
	ds.put(t, fc)
	nc := newObj("FelixConfiguration").(*api.FelixConfiguration)
	nc.Metadata.Name = "node." + thisNode
	nc.Spec.VXLANMTU = &mtu
	ds.put(t, nc)
	got := overlayFor(t, ds, 0)
	if !strings.Contains(got, "enabled true\ndevice vni 4097 port 4790 mtu 1400 addr 10.65.0.1") || strings.Contains(got, "route") {
		t.Fatalf("vxlanEnabled, vxlanVNI, vxlanPort, vxlanMTU not honoured:\n%s", got)
	}
	// vxlanEnabled false wins over an encapsulating pool.
	ds.put(t, vxlanPool("p", "10.65.0.0/16", api.VXLANModeAlways))
	off := false
	fc.Spec.VXLANEnabled = &off
	ds.put(t, fc)
	checkOverlay(t, ds, "enabled false\nencap [] nodes [10.0.1.1 10.0.1.2 10.0.2.3 10.0.2.4]\n")
}

func TestOverlayCovers(t *testing.T) {
	d := calc.OverlayDesired{V4: calc.OverlayFamily{EncapPools: []netip.Prefix{netip.MustParsePrefix("10.65.0.0/16")}},
		V6: calc.OverlayFamily{EncapPools: []netip.Prefix{netip.MustParsePrefix("fd00:65::/64")}}}
	for p, want := range map[string]bool{"10.65.1.0/26": true, "10.65.0.7/32": true, "10.0.0.0/8": false, "10.70.0.0/26": false,
		"fd00:65::40/122": true, "fd00:65::/48": false} {
		if got := d.Covers(netip.MustParsePrefix(p)); got != want {
			t.Errorf("Covers(%s) = %v, want %v", p, got, want)
		}
	}
}

func dualNode(name, addr, addr6, tunnel6 string) *api.Node {
	n := overlayNode(name, addr, "", "")
	n.Spec.BGP.IPv6Address, n.Spec.IPv6VXLANTunnelAddr = addr6, tunnel6
	return n
}

// IPv6 VXLAN: its own device, VTEPs from ipv6VXLANTunnelAddr and the
// nodes' IPv6 addresses, MACs from vxlanTunnelMACAddrV6 (else derived from
// "<name>-v6"), vxlanMTUV6, /128 routes for borrowed addresses; the IPv4
// side stays off when only the IPv6 pool encapsulates.
func TestOverlayDesiredIPv6(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("v4", "10.65.0.0/16", false))
	ds.put(t, vxlanPool("v6", "fd00:65::/64", api.VXLANModeAlways))
	ds.put(t, dualNode(thisNode, "10.0.1.1/24", "fd51:1::1/64", "fd00:65::1"))
	n2 := dualNode("node2", "10.0.2.2/24", "fd51:2::2/64", "fd00:65::41")
	n2.Spec.VXLANTunnelMACAddrV6 = "66:00:00:00:06:02"
	ds.put(t, n2)
	ds.block(t, "fd00:65::/122", thisNode)
	ds.block(t, "fd00:65::40/122", "node2")
	ds.block(t, "10.65.0.64/26", "node2")
	borrow(t, ds, "fd00:65::/122", 9, "node2")
	mtu6 := 1400
	fc := newObj("FelixConfiguration").(*api.FelixConfiguration)
	fc.Metadata.Name = "default"
	fc.Spec.VXLANMTUV6 = &mtu6
	ds.put(t, fc)
	checkOverlay(t, ds, `enabled false
route fd00:65::40/122 via fd00:65::41 dev vxlan onlink
route fd00:65::9/128 via fd00:65::41 dev vxlan onlink
encap [] nodes [10.0.1.1 10.0.2.2]
v6 enabled true
device vni 4096 port 4789 mtu 1400 addr fd00:65::1 mac `+calc.DerivedVTEPMAC(thisNode+"-v6")+` parent fd51:1::1
vtep node2 fd00:65::41 66:00:00:00:06:02 fd51:2::2
encap [fd00:65::/64] nodes [fd51:1::1 fd51:2::2]
`)
	o := calc.NewOverlay(thisNode)
	for _, k := range sortedKeys(ds) {
		o.Apply(decode(t, k, ds[k]))
	}
	if name := o.Desired().V6.Device.Name; name != "vxlan-v6.calico" {
		t.Errorf("IPv6 device %q", name)
	}
}

func applyAllOverlay(o *calc.Overlay, us []calc.Update) {
	for _, u := range us {
		o.Apply(u)
	}
	_ = o.Desired() // cached until the next update
}
