package calc

import (
	"crypto/sha1"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
)

// VXLAN defaults, as Calico's FelixConfiguration has them.
const (
	DefaultVXLANVNI  = 4096
	DefaultVXLANPort = 4789
	// VXLANDevice and VXLANDeviceV6 are the IPv4 and IPv6 VXLAN interfaces.
	VXLANDevice   = "vxlan.calico"
	VXLANDeviceV6 = "vxlan-v6.calico"
)

// Overlay is the part of the datastore VXLAN needs: nodes (their addresses,
// tunnel addresses and MACs), pools (which encapsulate), IPAM blocks (whose
// they are) and FelixConfiguration. It is pure: the loop feeds it the same
// stream the calculation gets and asks it for the desired overlay.
type Overlay struct {
	node      string
	nodes     map[string]*api.Node
	pools     map[string]*api.IPPool
	blocks    map[string]*ipam.Block // by key
	felixCfgs map[string]*api.FelixConfiguration
	bgpCfg    *api.BGPConfiguration // "default" (programClusterRoutes)
	weps      map[string]wepAddrs   // by key, for routeSource WorkloadIPs
	// last is the last result, valid until an update changes the input
	// (the loop asks on every apply, the input changes far less often).
	last *OverlayDesired
}

// NewOverlay makes an empty overlay state for a node.
func NewOverlay(node string) *Overlay {
	return &Overlay{node: node, nodes: map[string]*api.Node{}, pools: map[string]*api.IPPool{},
		blocks: map[string]*ipam.Block{}, felixCfgs: map[string]*api.FelixConfiguration{}, weps: map[string]wepAddrs{}}
}

// Apply records one update.
func (o *Overlay) Apply(u Update) {
	name := u.Key[strings.LastIndexByte(u.Key, '/')+1:]
	switch u.Kind {
	case "nodes", "ippools", "felixconfigurations", "bgpconfigurations", KindBlock:
		o.last = nil
	}
	switch u.Kind {
	case "nodes":
		if n, ok := u.Resource.(*api.Node); ok && !u.Deleted {
			o.nodes[name] = n
		} else {
			delete(o.nodes, name)
		}
	case "ippools":
		if p, ok := u.Resource.(*api.IPPool); ok && !u.Deleted {
			o.pools[name] = p
		} else {
			delete(o.pools, name)
		}
	case "felixconfigurations":
		if f, ok := u.Resource.(*api.FelixConfiguration); ok && !u.Deleted {
			o.felixCfgs[name] = f
		} else {
			delete(o.felixCfgs, name)
		}
	case "bgpconfigurations":
		o.applyBGPConfiguration(name, u)
	case "workloadendpoints":
		o.applyWorkloadEndpoint(u)
	case KindBlock:
		if u.Deleted || u.Block == nil {
			delete(o.blocks, u.Key)
		} else {
			o.blocks[u.Key] = u.Block
		}
	}
}

// VXLANDeviceConfig is a desired VXLAN device. Zero Addr means no device
// (VXLAN off, or this node has no tunnel address of the family yet).
type VXLANDeviceConfig struct {
	Name      string
	VNI, Port int
	MTU       int        // 0: the parent interface's MTU minus the overhead
	Addr      netip.Addr // this node's tunnel address
	MAC       string
	Parent    netip.Addr // this node's address: the source of the UDP packets
}

// VTEP is a remote node's tunnel endpoint.
type VTEP struct {
	Node   string
	Addr   netip.Addr // tunnel address (the neighbour's IP)
	MAC    string     // the neighbour's MAC and the FDB entry's key
	NodeIP netip.Addr // where the FDB entry sends: the node's address
}

// OverlayRoute is a route to a remote node's block or borrowed address:
// over the VXLAN device via the remote VTEP (onlink, Tunnel), over tunl0
// via the node's address (onlink, IPIP: a cluster route in an IP-in-IP
// pool), or directly via the node's address (CrossSubnet to a node in
// this node's subnet, or a cluster route in a pool without encapsulation).
type OverlayRoute struct {
	Via    netip.Addr
	Tunnel bool
	IPIP   bool
	// Parent: a cluster route direct to the node, onlink on the
	// interface holding this node's address (Parent4 or Parent6), as
	// Calico's Felix programs them.
	Parent bool
}

// OverlayFamily is the desired overlay of one IP family.
type OverlayFamily struct {
	// Enabled: VXLAN is on for the family (one of its pools encapsulates,
	// or vxlanEnabled is true). A node without a tunnel address of the
	// family still has no device.
	Enabled bool
	Device  VXLANDeviceConfig
	VTEPs   []VTEP // sorted by node
	// EncapPools are the family's pools with VXLAN on: routes learned over
	// BGP inside them are not programmed (as Calico's BIRD rejects them),
	// the overlay routes are.
	EncapPools []netip.Prefix
	// NodeAddrs are every node's address of the family: the only sources
	// VXLAN packets are accepted from.
	NodeAddrs []netip.Addr
	// Deny is how the rest are denied (iptablesFilterDenyAction).
	Deny FilterDeny
}

// OverlayDesired is the desired overlay state.
type OverlayDesired struct {
	V4, V6 OverlayFamily
	Port   int                           // the VXLAN UDP port
	Routes map[netip.Prefix]OverlayRoute // both families
	// IPIP is IP-in-IP (IPv4 only): tunl0, and how BGP routes go over it.
	IPIP IPIPDesired
	// BGPRejected are the pools without VXLAN when BGPConfiguration
	// programClusterRoutes is Disabled: routes learned over BGP inside
	// them are not programmed, as Calico's BIRD then rejects them for the
	// kernel (overlay_cluster.go).
	BGPRejected []netip.Prefix
	// Parent4 and Parent6 are this node's addresses, whose interfaces
	// direct cluster routes go out of (set only when there are some).
	Parent4, Parent6 netip.Addr
}

// felixVXLAN reads vxlanEnabled, vxlanVNI, vxlanPort, vxlanMTU and
// vxlanMTUV6: "default" overlaid by "node.<name>". enabled is nil when
// unset.
func (o *Overlay) felixVXLAN() (enabled *bool, vni, port, mtu, mtu6 int) {
	vni, port = DefaultVXLANVNI, DefaultVXLANPort
	for _, name := range []string{"default", "node." + o.node} {
		f, ok := o.felixCfgs[name]
		if !ok {
			continue
		}
		s := f.Spec
		if s.VXLANEnabled != nil {
			enabled = s.VXLANEnabled
		}
		if s.VXLANVNI != nil {
			vni = *s.VXLANVNI
		}
		if s.VXLANPort != nil {
			port = *s.VXLANPort
		}
		if s.VXLANMTU != nil {
			mtu = *s.VXLANMTU
		}
		if s.VXLANMTUV6 != nil {
			mtu6 = *s.VXLANMTUV6
		}
	}
	return enabled, vni, port, mtu, mtu6
}

// routedPool is a pool the agent routes other nodes' workloads in: one
// with VXLAN on, or, for cluster routes (overlay_cluster.go), one without.
type routedPool struct {
	prefix      netip.Prefix
	crossSubnet bool
}

func (o *Overlay) vxlanPools(v6 bool) []routedPool {
	var out []routedPool
	for _, p := range o.pools {
		pfx, err := p.Prefix()
		if err != nil || pfx.Addr().Is6() != v6 || !p.Spec.VXLANMode.Enabled() {
			continue
		}
		out = append(out, routedPool{prefix: pfx, crossSubnet: p.Spec.VXLANMode == api.VXLANModeCrossSubnet})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].prefix.String() < out[j].prefix.String() })
	return out
}

func poolOf(pools []routedPool, p netip.Prefix) (routedPool, bool) {
	for _, vp := range pools {
		if vp.prefix.Overlaps(p) && vp.prefix.Bits() <= p.Bits() {
			return vp, true
		}
	}
	return routedPool{}, false
}

// nodePrefix is a node's address of the family with its subnet mask.
func nodePrefix(n *api.Node, v6 bool) (netip.Prefix, bool) {
	if n == nil || n.Spec.BGP == nil {
		return netip.Prefix{}, false
	}
	s := n.Spec.BGP.IPv4Address
	if v6 {
		s = n.Spec.BGP.IPv6Address
	}
	if s == "" {
		return netip.Prefix{}, false
	}
	p, err := api.ParseCIDROrIP(s)
	if err != nil || p.Addr().Is6() != v6 {
		return netip.Prefix{}, false
	}
	return p, true
}

// NodeVTEPMAC is a node's IPv4 VTEP MAC: its vxlanTunnelMACAddr, else one
// derived from the node name (first six bytes of the name's SHA-1,
// locally administered, unicast), so every node computes the same.
func NodeVTEPMAC(n *api.Node, name string) string {
	return nodeMAC(n, name, false)
}

// NodeVTEPMACV6 is the IPv6 one: vxlanTunnelMACAddrV6, else derived from
// "<name>-v6".
func NodeVTEPMACV6(n *api.Node, name string) string {
	return nodeMAC(n, name, true)
}

func nodeMAC(n *api.Node, name string, v6 bool) string {
	set, seed := "", name
	if n != nil {
		set = n.Spec.VXLANTunnelMACAddr
	}
	if v6 {
		seed = name + "-v6"
		set = ""
		if n != nil {
			set = n.Spec.VXLANTunnelMACAddrV6
		}
	}
	if set != "" {
		if m, err := net.ParseMAC(set); err == nil {
			return m.String()
		}
	}
	return DerivedVTEPMAC(seed)
}

// DerivedVTEPMAC is the MAC derived from a name.
func DerivedVTEPMAC(name string) string {
	h := sha1.Sum([]byte(name))
	h[0] = h[0]&0xfe | 0x02
	return net.HardwareAddr(h[:6]).String()
}

func (o *Overlay) vtep(name string, v6 bool) (VTEP, bool) {
	n := o.nodes[name]
	if n == nil {
		return VTEP{}, false
	}
	tunnel := n.Spec.IPv4VXLANTunnelAddr
	if v6 {
		tunnel = n.Spec.IPv6VXLANTunnelAddr
	}
	addr, err := netip.ParseAddr(tunnel)
	np, ok := nodePrefix(n, v6)
	if err != nil || addr.Is6() != v6 || !ok {
		return VTEP{}, false
	}
	return VTEP{Node: name, Addr: addr, MAC: nodeMAC(n, name, v6), NodeIP: np.Addr()}, true
}

// Desired computes the desired overlay (callers must not change it).
func (o *Overlay) Desired() OverlayDesired {
	if o.last == nil {
		d := o.compute()
		o.last = &d
	}
	return *o.last
}

func (o *Overlay) compute() OverlayDesired {
	enabled, vni, port, mtu, mtu6 := o.felixVXLAN()
	d := OverlayDesired{Routes: map[netip.Prefix]OverlayRoute{}, Port: port}
	d.V4 = o.family(false, enabled, VXLANDeviceConfig{Name: VXLANDevice, VNI: vni, Port: port, MTU: mtu}, d.Routes)
	d.V6 = o.family(true, enabled, VXLANDeviceConfig{Name: VXLANDeviceV6, VNI: vni, Port: port, MTU: mtu6}, d.Routes)
	d.IPIP = o.ipip()
	d.Parent4, d.Parent6 = o.clusterRoutes(d.IPIP, d.Routes)
	d.BGPRejected = o.bgpRejected()
	d.V4.Deny, d.V6.Deny, d.IPIP.Deny = o.filterDeny(), o.filterDeny(), o.filterDeny()
	return d
}

// family computes one family's overlay and adds its routes.
func (o *Overlay) family(v6 bool, enabled *bool, dev VXLANDeviceConfig, routes map[netip.Prefix]OverlayRoute) OverlayFamily {
	var d OverlayFamily
	for _, n := range o.nodes {
		if p, ok := nodePrefix(n, v6); ok {
			d.NodeAddrs = append(d.NodeAddrs, p.Addr())
		}
	}
	sort.Slice(d.NodeAddrs, func(i, j int) bool { return d.NodeAddrs[i].Less(d.NodeAddrs[j]) })
	pools := o.vxlanPools(v6)
	d.Enabled = len(pools) > 0
	if enabled != nil {
		d.Enabled = *enabled
	}
	if !d.Enabled {
		return d
	}
	for _, p := range pools {
		d.EncapPools = append(d.EncapPools, p.prefix)
	}
	self, selfOK := o.vtep(o.node, v6)
	if selfOK {
		dev.Addr, dev.MAC, dev.Parent = self.Addr, self.MAC, self.NodeIP
		d.Device = dev
	}
	mySubnet, _ := nodePrefix(o.nodes[o.node], v6)
	vteps := map[string]VTEP{}
	for name := range o.nodes {
		if name == o.node {
			continue
		}
		if v, ok := o.vtep(name, v6); ok {
			vteps[name] = v
			d.VTEPs = append(d.VTEPs, v)
		}
	}
	sort.Slice(d.VTEPs, func(i, j int) bool { return d.VTEPs[i].Node < d.VTEPs[j].Node })
	route := func(dst netip.Prefix, node string, pool routedPool) {
		if node == o.node {
			return
		}
		v, ok := vteps[node]
		if !ok {
			return
		}
		if pool.crossSubnet && mySubnet.IsValid() && mySubnet.Masked().Contains(v.NodeIP) {
			routes[dst] = OverlayRoute{Via: v.NodeIP}
			return
		}
		if selfOK {
			routes[dst] = OverlayRoute{Via: v.Addr, Tunnel: true}
		}
	}
	o.remoteRoutes(v6, pools, route)
	return d
}

// remoteRoutes calls route for each destination in pools that another
// node's workloads hold: every IPAM block and then every address of a
// block held by another node than the block's (a host route each, after
// the block routes), or, with routeSource WorkloadIPs, every address of
// the workload endpoints. route must skip this node's own.
func (o *Overlay) remoteRoutes(v6 bool, pools []routedPool, route func(netip.Prefix, string, routedPool)) {
	if o.workloadIPs() {
		o.workloadRoutes(v6, pools, route)
		return
	}
	keys := make([]string, 0, len(o.blocks))
	for k := range o.blocks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var borrowed []func()
	for _, k := range keys {
		b := o.blocks[k]
		pfx, err := b.Prefix()
		if err != nil || pfx.Addr().Is6() != v6 {
			continue
		}
		pool, ok := poolOf(pools, pfx)
		if !ok {
			continue
		}
		host := b.Host()
		route(pfx, host, pool)
		for _, al := range (ipam.BlockInfo{Prefix: pfx, Block: b}).Allocations() {
			if owner := al.Attrs[ipam.AttrNode]; owner != "" && owner != host {
				dst := netip.PrefixFrom(al.Addr, al.Addr.BitLen())
				borrowed = append(borrowed, func() { route(dst, owner, pool) })
			}
		}
	}
	for _, f := range borrowed {
		f()
	}
}

// Covers reports whether an encapsulating pool, or one in BGPRejected,
// holds p: a route learned over BGP for p is not programmed.
func (d OverlayDesired) Covers(p netip.Prefix) bool {
	for _, e := range slices.Concat(d.V4.EncapPools, d.V6.EncapPools, d.BGPRejected) {
		if e.Bits() <= p.Bits() && e.Contains(p.Addr()) {
			return true
		}
	}
	return false
}
