package calc

import (
	"net/netip"
	"strings"

	"github.com/calico-aio/calico-aio/store/api"
)

// The nodes' IPv4 addresses fill cali40all-hosts-net, which the NAT
// outgoing rule excludes with natOutgoingExclusions IPPoolsAndHostIPs. The
// overlay (felix/routes/overlay_ipip.go) fills the same set, from the same node
// addresses, for IP-in-IP; both give it the same members.

// applyNode records a node's IPv4 address (spec.bgp.ipv4Address).
func (s *State) applyNode(u Update) {
	name := u.Key[strings.LastIndexByte(u.Key, '/')+1:]
	n, ok := u.Resource.(*api.Node)
	if p, has := nodePrefix(n, false); ok && !u.Deleted && has {
		s.hostAddrs[name] = p.Addr()
		return
	}
	delete(s.hostAddrs, name)
}

// hostMembers is the all-hosts set's members: each node's address as a
// /32, as the overlay writes them.
func (s *State) hostMembers() []string {
	out := make([]string, 0, len(s.hostAddrs))
	for _, a := range s.hostAddrs {
		out = append(out, netip.PrefixFrom(a, 32).String())
	}
	return out
}
