package calc

import (
	"crypto/sha1"
	"net"
	"net/netip"
	"sort"
	"strings"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
)

// VXLAN defaults, as Calico's FelixConfiguration has them.
const (
	DefaultVXLANVNI  = 4096
	DefaultVXLANPort = 4789
	// VXLANDevice is the IPv4 VXLAN interface.
	VXLANDevice = "vxlan.calico"
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
}

// NewOverlay makes an empty overlay state for a node.
func NewOverlay(node string) *Overlay {
	return &Overlay{node: node, nodes: map[string]*api.Node{}, pools: map[string]*api.IPPool{},
		blocks: map[string]*ipam.Block{}, felixCfgs: map[string]*api.FelixConfiguration{}}
}

// Apply records one update.
func (o *Overlay) Apply(u Update) {
	name := u.Key[strings.LastIndexByte(u.Key, '/')+1:]
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
	case KindBlock:
		if u.Deleted || u.Block == nil {
			delete(o.blocks, u.Key)
		} else {
			o.blocks[u.Key] = u.Block
		}
	}
}

// VXLANDeviceConfig is the desired IPv4 VXLAN device. Zero Addr means no
// device (VXLAN off, or this node has no tunnel address yet).
type VXLANDeviceConfig struct {
	VNI, Port int
	MTU       int        // 0: the parent interface's MTU minus 50
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
// over the VXLAN device via the remote VTEP (onlink), or, for CrossSubnet
// to a node in this node's subnet, directly via the node's address.
type OverlayRoute struct {
	Via    netip.Addr
	Tunnel bool
}

// OverlayDesired is the desired overlay state.
type OverlayDesired struct {
	// Enabled: VXLAN is on (some pool encapsulates, or vxlanEnabled is
	// true). A node without a tunnel address still has no device.
	Enabled bool
	Port    int // the VXLAN UDP port (when Enabled)
	Device  VXLANDeviceConfig
	VTEPs   []VTEP // sorted by node
	Routes  map[netip.Prefix]OverlayRoute
	// EncapPools are the IPv4 pools with VXLAN on: routes learned over
	// BGP inside them are not programmed (as Calico's BIRD rejects them),
	// the overlay routes are.
	EncapPools []netip.Prefix
	// NodeAddrs are every node's IPv4 address: the only sources VXLAN
	// packets are accepted from.
	NodeAddrs []netip.Addr
}

// felixVXLAN reads vxlanEnabled, vxlanVNI, vxlanPort and vxlanMTU:
// "default" overlaid by "node.<name>". enabled is nil when unset.
func (o *Overlay) felixVXLAN() (enabled *bool, vni, port, mtu int) {
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
	}
	return enabled, vni, port, mtu
}

// vxlanPool is an IPv4 pool with VXLAN on.
type vxlanPool struct {
	prefix      netip.Prefix
	crossSubnet bool
}

func (o *Overlay) vxlanPools() []vxlanPool {
	var out []vxlanPool
	for _, p := range o.pools {
		pfx, err := p.Prefix()
		if err != nil || !pfx.Addr().Is4() || !p.Spec.VXLANMode.Enabled() {
			continue
		}
		out = append(out, vxlanPool{prefix: pfx, crossSubnet: p.Spec.VXLANMode == api.VXLANModeCrossSubnet})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].prefix.String() < out[j].prefix.String() })
	return out
}

func poolOf(pools []vxlanPool, p netip.Prefix) (vxlanPool, bool) {
	for _, vp := range pools {
		if vp.prefix.Overlaps(p) && vp.prefix.Bits() <= p.Bits() {
			return vp, true
		}
	}
	return vxlanPool{}, false
}

// nodePrefix is a node's IPv4 address with its subnet mask.
func nodePrefix(n *api.Node) (netip.Prefix, bool) {
	if n == nil || n.Spec.BGP == nil || n.Spec.BGP.IPv4Address == "" {
		return netip.Prefix{}, false
	}
	p, err := api.ParseCIDROrIP(n.Spec.BGP.IPv4Address)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, false
	}
	return p, true
}

// NodeVTEPMAC is a node's VTEP MAC: its vxlanTunnelMACAddr, else the one
// Calico derives from the node name (first six bytes of the name's SHA-1,
// locally administered, unicast), so every node computes the same.
func NodeVTEPMAC(n *api.Node, name string) string {
	if n != nil && n.Spec.VXLANTunnelMACAddr != "" {
		if m, err := net.ParseMAC(n.Spec.VXLANTunnelMACAddr); err == nil {
			return m.String()
		}
	}
	return DerivedVTEPMAC(name)
}

// DerivedVTEPMAC is the MAC derived from a node name.
func DerivedVTEPMAC(name string) string {
	h := sha1.Sum([]byte(name))
	h[0] = h[0]&0xfe | 0x02
	return net.HardwareAddr(h[:6]).String()
}

func (o *Overlay) vtep(name string) (VTEP, bool) {
	n := o.nodes[name]
	if n == nil {
		return VTEP{}, false
	}
	addr, err := netip.ParseAddr(n.Spec.IPv4VXLANTunnelAddr)
	np, ok := nodePrefix(n)
	if err != nil || !addr.Is4() || !ok {
		return VTEP{}, false
	}
	return VTEP{Node: name, Addr: addr, MAC: NodeVTEPMAC(n, name), NodeIP: np.Addr()}, true
}

// Desired computes the desired overlay.
func (o *Overlay) Desired() OverlayDesired {
	d := OverlayDesired{Routes: map[netip.Prefix]OverlayRoute{}}
	for _, n := range o.nodes {
		if p, ok := nodePrefix(n); ok {
			d.NodeAddrs = append(d.NodeAddrs, p.Addr())
		}
	}
	sort.Slice(d.NodeAddrs, func(i, j int) bool { return d.NodeAddrs[i].Less(d.NodeAddrs[j]) })
	pools := o.vxlanPools()
	for _, p := range pools {
		d.EncapPools = append(d.EncapPools, p.prefix)
	}
	enabled, vni, port, mtu := o.felixVXLAN()
	d.Enabled = len(pools) > 0
	if enabled != nil {
		d.Enabled = *enabled
	}
	if !d.Enabled {
		d.EncapPools = nil
		return d
	}
	d.Port = port
	self, selfOK := o.vtep(o.node)
	if selfOK {
		d.Device = VXLANDeviceConfig{VNI: vni, Port: port, MTU: mtu, Addr: self.Addr, MAC: self.MAC, Parent: self.NodeIP}
	}
	mySubnet, _ := nodePrefix(o.nodes[o.node])
	vteps := map[string]VTEP{}
	for name := range o.nodes {
		if name == o.node {
			continue
		}
		if v, ok := o.vtep(name); ok {
			vteps[name] = v
			d.VTEPs = append(d.VTEPs, v)
		}
	}
	sort.Slice(d.VTEPs, func(i, j int) bool { return d.VTEPs[i].Node < d.VTEPs[j].Node })
	route := func(dst netip.Prefix, node string, pool vxlanPool) {
		if node == o.node {
			return
		}
		v, ok := vteps[node]
		if !ok {
			return
		}
		if pool.crossSubnet && mySubnet.IsValid() && mySubnet.Masked().Contains(v.NodeIP) {
			d.Routes[dst] = OverlayRoute{Via: v.NodeIP}
			return
		}
		if selfOK {
			d.Routes[dst] = OverlayRoute{Via: v.Addr, Tunnel: true}
		}
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
		if err != nil || !pfx.Addr().Is4() {
			continue
		}
		pool, ok := poolOf(pools, pfx)
		if !ok {
			continue
		}
		host := b.Host()
		route(pfx, host, pool)
		// Addresses held by another node than the block's: a /32 each
		// (after every block route, so they win over nothing but refine).
		for _, al := range (ipam.BlockInfo{Prefix: pfx, Block: b}).Allocations() {
			if owner := al.Attrs[ipam.AttrNode]; owner != "" && owner != host {
				dst := netip.PrefixFrom(al.Addr, 32)
				borrowed = append(borrowed, func() { route(dst, owner, pool) })
			}
		}
	}
	for _, f := range borrowed {
		f()
	}
	return d
}

// Covers reports whether an encapsulating pool holds p: a route learned
// over BGP for p must not replace the overlay's.
func (d OverlayDesired) Covers(p netip.Prefix) bool {
	for _, e := range d.EncapPools {
		if e.Bits() <= p.Bits() && e.Contains(p.Addr()) {
			return true
		}
	}
	return false
}
