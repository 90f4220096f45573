package felix

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/iptables"
)

// vxlanHostsSet holds every Calico node's IPv4 address: VXLAN packets are
// accepted only from them (Calico's name for the set).
const vxlanHostsSet = "cali40all-vxlan-net"

// addOverlay adds the VXLAN device, its peers and the overlay routes to
// des (after local endpoint and blackhole routes, which win), then the
// routes learned over BGP, except those inside a pool VXLAN carries: as
// Calico's BIRD config rejects those for the kernel, the overlay's own
// routes are the ones programmed.
func addOverlay(des *dataplane.Desired, ov calc.OverlayDesired, learned map[netip.Prefix]dataplane.RouteTarget) {
	addVXLANFilter(des, ov)
	if dev := ov.Device; dev.Addr.IsValid() {
		des.VXLAN.Device = &dataplane.VXLANDevice{Name: calc.VXLANDevice, VNI: dev.VNI, Port: dev.Port, MTU: dev.MTU,
			Addr: dev.Addr, MAC: dev.MAC, Parent: dev.Parent}
		for _, v := range ov.VTEPs {
			des.VXLAN.Peers = append(des.VXLAN.Peers, dataplane.VXLANPeer{Addr: v.Addr, MAC: v.MAC, NodeIP: v.NodeIP})
		}
	}
	for p, r := range ov.Routes {
		if _, local := des.Routes[p]; local {
			continue
		}
		t := dataplane.RouteTarget{Via: []netip.Addr{r.Via}}
		if r.Tunnel {
			t.Iface, t.OnLink = calc.VXLANDevice, true
		}
		des.Routes[p] = t
	}
	for p, t := range learned {
		if _, have := des.Routes[p]; !have && !ov.Covers(p) {
			des.Routes[p] = t
		}
	}
}

// addVXLANFilter adds, with VXLAN on, the IP set of node addresses and
// puts first in cali-INPUT: accept the VXLAN port from those addresses,
// drop it from anyone else; and first in cali-OUTPUT: accept VXLAN to
// them (so host endpoint egress policy cannot cut the overlay), as
// Calico's Felix does. The rendered chains are copied, never changed in
// place.
func addVXLANFilter(des *dataplane.Desired, ov calc.OverlayDesired) {
	if !ov.Enabled {
		return
	}
	members := make([]string, 0, len(ov.NodeAddrs))
	for _, a := range ov.NodeAddrs {
		members = append(members, netip.PrefixFrom(a, 32).String())
	}
	if des.IPSets == nil {
		des.IPSets = map[string]dataplane.IPSet{}
	}
	des.IPSets[vxlanHostsSet] = dataplane.IPSet{Type: "hash:net", Family: "inet", Members: members}
	udp := fmt.Sprintf("-p udp -m udp --dport %d", ov.Port)
	prepend := map[string][]iptables.Rule{
		"cali-INPUT": {
			{Match: udp + " -m set --match-set " + vxlanHostsSet + " src -m addrtype --dst-type LOCAL", Action: "-j ACCEPT",
				Comment: "Allow VXLAN packets from known Calico nodes"},
			{Match: udp + " -m addrtype --dst-type LOCAL", Action: "-j DROP", Comment: "Drop VXLAN packets from unknown hosts"},
		},
		"cali-OUTPUT": {
			{Match: udp + " -m set --match-set " + vxlanHostsSet + " dst -m addrtype --src-type LOCAL", Action: "-j ACCEPT",
				Comment: "Allow VXLAN packets to known Calico nodes"},
		},
	}
	tables := des.Tables[4]
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
