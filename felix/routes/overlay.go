// Package routes owns the kernel state the agent adds to calc's desired
// state: the routes to local workloads and their egress shaping, the
// overlay devices and their input filters, and the overlay, cluster and
// BGP-learned routes, merged into one dataplane.Desired.
package routes

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/internal/rtproto"
	"github.com/calico-aio/calico-aio/iptables"
)

// The IP sets of every Calico node's address, by IP version: VXLAN packets
// are accepted only from them (Calico's names for the sets).
var vxlanHostsSets = map[int]string{4: "cali40all-vxlan-net", 6: "cali60all-vxlan-net"}

// AddOverlay adds the VXLAN devices, their peers and the overlay routes
// (VXLAN, and the cluster routes of FelixConfiguration
// programClusterRoutes) to des (after local endpoint and blackhole routes,
// which win), then the routes learned over BGP, except those inside a
// pool VXLAN carries or one BGPConfiguration programClusterRoutes Disabled
// hands to Felix: as Calico's BIRD config rejects those for the kernel,
// the overlay's own routes are the ones programmed. Learned routes inside
// an IPIP pool go over tunl0 (addIPIP).
// parents names the interfaces holding ov.Parent4/Parent6 (ParentIfaces).
func AddOverlay(des *dataplane.Desired, ov calc.OverlayDesired, learned map[netip.Prefix]dataplane.RouteTarget, parents map[netip.Addr]string) {
	addVXLANFilter(des, 4, ov.V4, ov.Port)
	addVXLANFilter(des, 6, ov.V6, ov.Port)
	des.VXLAN, des.VXLANV6 = vxlanDevice(ov.V4), vxlanDevice(ov.V6)
	for p, r := range ov.Routes {
		if _, local := des.Routes[p]; local {
			continue
		}
		// A direct CrossSubnet route is the agent's own, computed from the
		// datastore: the agent's protocol, not BGP's.
		t := dataplane.RouteTarget{Via: []netip.Addr{r.Via}, Proto: rtproto.Workload}
		switch {
		case r.Tunnel:
			t.Iface, t.OnLink = calc.VXLANDevice, true
			if p.Addr().Is6() {
				t.Iface = calc.VXLANDeviceV6
			}
		case r.IPIP:
			t.Iface, t.OnLink = calc.IPIPDevice, true
		case r.Parent:
			t.Iface = parents[ov.Parent4]
			if p.Addr().Is6() {
				t.Iface = parents[ov.Parent6]
			}
			t.OnLink = t.Iface != "" // unknown: the kernel picks the way to the node
		}
		des.Routes[p] = t
	}
	for p, t := range learned {
		if _, have := des.Routes[p]; !have && !ov.Covers(p) {
			des.Routes[p] = t
		}
	}
	addIPIP(des, ov.IPIP, learned)
}

// vxlanDevice is the dataplane's view of one family's device and peers.
func vxlanDevice(f calc.OverlayFamily) dataplane.VXLAN {
	var v dataplane.VXLAN
	dev := f.Device
	if !dev.Addr.IsValid() {
		return v
	}
	v.Device = &dataplane.VXLANDevice{Name: dev.Name, VNI: dev.VNI, Port: dev.Port, MTU: dev.MTU,
		Addr: dev.Addr, MAC: dev.MAC, Parent: dev.Parent}
	for _, p := range f.VTEPs {
		v.Peers = append(v.Peers, dataplane.VXLANPeer{Addr: p.Addr, MAC: p.MAC, NodeIP: p.NodeIP})
	}
	return v
}

// addVXLANFilter adds, with VXLAN on for the family, the IP set of node
// addresses and puts first in cali-INPUT: accept the VXLAN port from
// those addresses, drop it from anyone else; and first in cali-OUTPUT:
// accept VXLAN to them (so host endpoint egress policy cannot cut the
// overlay), as Calico's Felix does. The rendered chains are copied, never
// changed in place.
func addVXLANFilter(des *dataplane.Desired, ver int, f calc.OverlayFamily, port int) {
	if !f.Enabled {
		return
	}
	set := vxlanHostsSets[ver]
	fam := map[int]string{4: "inet", 6: "inet6"}[ver]
	members := make([]string, 0, len(f.NodeAddrs))
	for _, a := range f.NodeAddrs {
		members = append(members, netip.PrefixFrom(a, a.BitLen()).String())
	}
	if des.IPSets == nil {
		des.IPSets = map[string]dataplane.IPSet{}
	}
	des.IPSets[set] = dataplane.IPSet{Type: "hash:net", Family: fam, Members: members}
	udp := fmt.Sprintf("-p udp -m udp --dport %d", port)
	prepend := map[string][]iptables.Rule{
		"cali-INPUT": {
			{Match: udp + " -m set --match-set " + set + " src -m addrtype --dst-type LOCAL", Action: "-j ACCEPT",
				Comment: "Allow VXLAN packets from known Calico nodes"},
			{Match: udp + " -m addrtype --dst-type LOCAL", Action: f.Deny.Target(), Comment: f.Deny.Word() + " VXLAN packets from unknown hosts"},
		},
		"cali-OUTPUT": {
			{Match: udp + " -m set --match-set " + set + " dst -m addrtype --src-type LOCAL", Action: "-j ACCEPT",
				Comment: "Allow VXLAN packets to known Calico nodes"},
		},
	}
	prependFilter(des, ver, prepend)
}

// prependFilter puts rules at the head of the IP version's filter chains
// they are keyed by (chains the calculation did not render are left out).
func prependFilter(des *dataplane.Desired, ver int, prepend map[string][]iptables.Rule) {
	tables := des.Tables[ver]
	if tables == nil {
		return
	}
	filter := slices.Clone(tables["filter"])
	for i, ch := range filter {
		if rules, ok := prepend[ch.Name]; ok {
			filter[i] = iptables.Chain{Name: ch.Name, Rules: append(slices.Clone(rules), ch.Rules...)}
		}
	}
	tables["filter"] = filter
}
