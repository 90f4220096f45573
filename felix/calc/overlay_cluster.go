package calc

import (
	"net/netip"
	"sort"

	"github.com/calico-aio/calico-aio/store/api"
)

// Cluster routes: the routes to other nodes' workloads in pools with
// vxlanMode Never (IP-in-IP and unencapsulated pools). In Calico v3.32
// BIRD programs them from BGP unless told otherwise; two settings hand
// them to Felix:
//   - FelixConfiguration programClusterRoutes Enabled (default Disabled):
//     the agent programs them itself from the datastore, as it does the
//     VXLAN routes (per IPAM block and borrowed address, or per workload
//     address with routeSource WorkloadIPs): in an IP-in-IP pool over
//     tunl0 onlink via the node's address (directly in a CrossSubnet pool
//     to a node in this node's subnet), otherwise via the node's address
//     onlink on the interface holding this node's address (in any subnet,
//     as Calico's Felix does: across subnets the fabric must answer).
//     These win over a route learned over BGP for the same destination.
//   - BGPConfiguration "default" programClusterRoutes Disabled (default
//     Enabled; Calico reads no node.<name> value): routes learned over
//     BGP inside those pools are not programmed (BGPRejected), as
//     Calico's BIRD then rejects them for the kernel. BGP still
//     advertises the blocks. With Felix's setting Disabled too, nothing
//     routes those pools, as in Calico.

// applyBGPConfiguration records BGPConfiguration "default".
func (o *Overlay) applyBGPConfiguration(name string, u Update) {
	if name != "default" {
		return
	}
	o.bgpCfg = nil
	if c, ok := u.Resource.(*api.BGPConfiguration); ok && !u.Deleted {
		o.bgpCfg = c
	}
}

// programClusterRoutes reads FelixConfiguration programClusterRoutes
// ("default" overlaid by "node.<name>").
func (o *Overlay) programClusterRoutes() bool {
	v := ""
	for _, name := range []string{"default", "node." + o.node} {
		if f, ok := o.felixCfgs[name]; ok && f.Spec.ProgramClusterRoutes != "" {
			v = f.Spec.ProgramClusterRoutes
		}
	}
	return v == "Enabled"
}

// clusterPools are the family's pools with vxlanMode Never, sorted.
func (o *Overlay) clusterPools(v6 bool) []routedPool {
	var out []routedPool
	for _, p := range o.pools {
		pfx, err := p.Prefix()
		if err != nil || pfx.Addr().Is6() != v6 || p.Spec.VXLANMode.Enabled() {
			continue
		}
		out = append(out, routedPool{prefix: pfx})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].prefix.String() < out[j].prefix.String() })
	return out
}

// clusterRoutes adds, with FelixConfiguration programClusterRoutes
// Enabled, the route to each other node's blocks (borrowed addresses,
// workload addresses) in the pools without VXLAN, and returns this node's
// addresses when a direct one uses them. ip decides the IP-in-IP ones as
// it does for routes learned over BGP.
func (o *Overlay) clusterRoutes(ip IPIPDesired, routes map[netip.Prefix]OverlayRoute) (parent4, parent6 netip.Addr) {
	if !o.programClusterRoutes() {
		return parent4, parent6
	}
	for _, v6 := range []bool{false, true} {
		self, selfOK := nodePrefix(o.nodes[o.node], v6)
		o.remoteRoutes(v6, o.clusterPools(v6), func(dst netip.Prefix, node string, _ routedPool) {
			np, ok := nodePrefix(o.nodes[node], v6)
			if node == o.node || !ok {
				return
			}
			if next, tunnel := ip.IPIPRoute(dst, []netip.Addr{np.Addr()}); tunnel {
				routes[dst] = OverlayRoute{Via: next, IPIP: true}
				return
			}
			routes[dst] = OverlayRoute{Via: np.Addr(), Parent: selfOK}
			switch {
			case selfOK && v6:
				parent6 = self.Addr()
			case selfOK:
				parent4 = self.Addr()
			}
		})
	}
	return parent4, parent6
}

// bgpRejected is, with BGPConfiguration "default" programClusterRoutes
// Disabled, every pool without VXLAN (both families).
func (o *Overlay) bgpRejected() []netip.Prefix {
	if o.bgpCfg == nil || o.bgpCfg.Spec.ProgramClusterRoutes != "Disabled" {
		return nil
	}
	var out []netip.Prefix
	for _, v6 := range []bool{false, true} {
		for _, p := range o.clusterPools(v6) {
			out = append(out, p.prefix)
		}
	}
	return out
}
