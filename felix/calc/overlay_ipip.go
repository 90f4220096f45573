package calc

import (
	"net/netip"
	"slices"
	"sort"

	"github.com/calico-aio/calico-aio/store/api"
)

// IPIPDevice is Calico's IP-in-IP interface (the kernel's fallback tunnel).
const IPIPDevice = "tunl0"

// IPIPPool is an IPv4 pool with IP-in-IP on.
type IPIPPool struct {
	Prefix      netip.Prefix
	CrossSubnet bool
}

// IPIPDesired is the desired IP-in-IP state. Unlike VXLAN, its routes are
// carried by BGP, as Calico's are: a route learned for a prefix inside an
// IPIP pool is installed over tunl0 (IPIPRoute).
type IPIPDesired struct {
	// Enabled: one IPv4 pool has ipipMode Always or CrossSubnet, or
	// FelixConfiguration ipipEnabled is true (ipipEnabled false wins).
	Enabled bool
	Deny    FilterDeny // how IP-in-IP from non-Calico hosts is denied
	Addr    netip.Addr // this node's IPIP tunnel address (invalid: none yet)
	MTU     int        // ipipMTU; 0: the parent interface's MTU minus 20
	Parent  netip.Addr // this node's IPv4 address
	// Subnet is this node's IPv4 address with its mask: CrossSubnet next
	// hops inside it are reached directly.
	Subnet netip.Prefix
	Pools  []IPIPPool // sorted by prefix
	// NodeAddrs are every node's IPv4 address: the only sources IP-in-IP
	// packets are accepted from.
	NodeAddrs []netip.Addr
}

// felixIPIP reads ipipEnabled and ipipMTU: "default" overlaid by
// "node.<name>". enabled is nil when unset.
func (o *Overlay) felixIPIP() (enabled *bool, mtu int) {
	for _, name := range []string{"default", "node." + o.node} {
		f, ok := o.felixCfgs[name]
		if !ok {
			continue
		}
		if f.Spec.IPIPEnabled != nil {
			enabled = f.Spec.IPIPEnabled
		}
		if f.Spec.IPIPMTU != nil {
			mtu = *f.Spec.IPIPMTU
		}
	}
	return enabled, mtu
}

// ipip computes the desired IP-in-IP state.
func (o *Overlay) ipip() IPIPDesired {
	var d IPIPDesired
	for _, n := range o.nodes {
		if p, ok := nodePrefix(n, false); ok {
			d.NodeAddrs = append(d.NodeAddrs, p.Addr())
		}
	}
	sort.Slice(d.NodeAddrs, func(i, j int) bool { return d.NodeAddrs[i].Less(d.NodeAddrs[j]) })
	for _, p := range o.pools {
		pfx, err := p.Prefix()
		if err != nil || !pfx.Addr().Is4() || !p.Spec.IPIPMode.Enabled() {
			continue
		}
		d.Pools = append(d.Pools, IPIPPool{Prefix: pfx, CrossSubnet: p.Spec.IPIPMode == api.IPIPModeCrossSubnet})
	}
	sort.Slice(d.Pools, func(i, j int) bool { return d.Pools[i].Prefix.String() < d.Pools[j].Prefix.String() })
	enabled, mtu := o.felixIPIP()
	d.Enabled = len(d.Pools) > 0
	if enabled != nil {
		d.Enabled = *enabled
	}
	if !d.Enabled {
		d.Pools = nil
		return d
	}
	d.MTU = mtu
	self := o.nodes[o.node]
	if p, ok := nodePrefix(self, false); ok {
		d.Parent, d.Subnet = p.Addr(), p.Masked()
	}
	if self != nil && self.Spec.BGP != nil {
		if a, err := netip.ParseAddr(self.Spec.BGP.IPv4IPIPTunnelAddr); err == nil && a.Is4() {
			d.Addr = a
		}
	}
	return d
}

// IPIPRoute says how a route learned over BGP for dst with next hops via
// is installed: tunnel false leaves it as learned (not in an IPIP pool, or
// CrossSubnet with every next hop in this node's subnet); tunnel true puts
// it over tunl0 onlink via next (the lowest next hop: a tunnel route has
// one), as Calico's BIRD configuration does.
func (d IPIPDesired) IPIPRoute(dst netip.Prefix, via []netip.Addr) (next netip.Addr, tunnel bool) {
	if !d.Enabled || len(via) == 0 || !dst.Addr().Is4() {
		return netip.Addr{}, false
	}
	var pool *IPIPPool
	for i, p := range d.Pools {
		if p.Prefix.Bits() <= dst.Bits() && p.Prefix.Contains(dst.Addr()) {
			pool = &d.Pools[i]
			break
		}
	}
	if pool == nil {
		return netip.Addr{}, false
	}
	if pool.CrossSubnet && d.Subnet.IsValid() && !slices.ContainsFunc(via, func(a netip.Addr) bool { return !d.Subnet.Contains(a) }) {
		return netip.Addr{}, false
	}
	lowest := slices.MinFunc(via, func(a, b netip.Addr) int { return a.Compare(b) })
	return lowest, true
}
