package routes

import (
	"net/netip"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
	"github.com/calico-aio/calico-aio/internal/rtproto"
	"github.com/calico-aio/calico-aio/iptables"
)

// ipipHostsSet is the IP set of every Calico node's IPv4 address that
// IP-in-IP packets are accepted from (Calico's name for it).
const ipipHostsSet = "cali40all-hosts-net"

// addIPIP adds, with IP-in-IP on, tunl0, the filter rules for IP protocol
// 4, and puts the BGP-learned routes inside IPIP pools over tunl0: as
// Calico's BIRD configuration does, a route whose next hop is another
// node goes "via <node address> dev tunl0 onlink", except in a
// CrossSubnet pool when the next hop is in this node's subnet (left
// direct, as learned). Those routes keep BGP's protocol: BGP carries them.
func addIPIP(des *dataplane.Desired, ip calc.IPIPDesired, learned map[netip.Prefix]dataplane.RouteTarget) {
	if !ip.Enabled {
		return
	}
	des.IPIP = &dataplane.IPIPDevice{Name: calc.IPIPDevice, MTU: ip.MTU, Addr: ip.Addr, Parent: ip.Parent}
	addIPIPFilter(des, ip)
	for p, t := range learned {
		have, ok := des.Routes[p]
		if !ok || have.String() != t.String() || t.Iface != "" || t.Blackhole {
			continue // a local route won, or an overlay route replaced it
		}
		if next, tunnel := ip.IPIPRoute(p, t.Via); tunnel {
			des.Routes[p] = dataplane.RouteTarget{Iface: calc.IPIPDevice, Via: []netip.Addr{next}, OnLink: true, Proto: rtproto.BGP, Metric: t.Metric}
		}
	}
}

// addIPIPFilter adds the IP set of node addresses and puts first in
// cali-INPUT: accept IP-in-IP from those addresses, drop it from anyone
// else; and first in cali-OUTPUT: accept IP-in-IP to them, as Calico's
// Felix does. The rendered chains are copied, never changed in place.
func addIPIPFilter(des *dataplane.Desired, ip calc.IPIPDesired) {
	members := make([]string, 0, len(ip.NodeAddrs))
	for _, a := range ip.NodeAddrs {
		members = append(members, netip.PrefixFrom(a, 32).String())
	}
	if des.IPSets == nil {
		des.IPSets = map[string]dataplane.IPSet{}
	}
	des.IPSets[ipipHostsSet] = dataplane.IPSet{Type: "hash:net", Family: "inet", Members: members}
	prepend := map[string][]iptables.Rule{
		"cali-INPUT": {
			{Match: "-p 4 -m set --match-set " + ipipHostsSet + " src -m addrtype --dst-type LOCAL", Action: "-j ACCEPT",
				Comment: "Allow IPIP packets from Calico hosts"},
			{Match: "-p 4", Action: ip.Deny.Target(), Comment: ip.Deny.Word() + " IPIP packets from non-Calico hosts"},
		},
		"cali-OUTPUT": {
			{Match: "-p 4 -m set --match-set " + ipipHostsSet + " dst -m addrtype --src-type LOCAL", Action: "-j ACCEPT",
				Comment: "Allow IPIP packets to other Calico hosts"},
		},
	}
	prependFilter(des, 4, prepend)
}
