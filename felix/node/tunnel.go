package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// tunnelFamily is one kind of tunnel address: Calico's IPAM handle
// prefix and allocation type (calico-node -allocate-tunnel-addrs writes
// the same), which pools call for it, and the Node fields that hold it
// and its MAC (IPIP has none).
type tunnelFamily struct {
	name         string
	v6           bool
	handlePrefix string
	attrType     string
	encap        func(api.IPPoolSpec) bool
	// fields returns the Node's address and MAC fields; with want "" it
	// may return scratch fields rather than create a missing parent.
	fields func(n *api.Node, want string) (addr, mac *string)
	mac    func(*api.Node, string) string // nil: no MAC
}

var tunnelFamilies = []tunnelFamily{
	{"vxlan", false, "vxlan-tunnel-addr-", "vxlanTunnelAddress", func(s api.IPPoolSpec) bool { return s.VXLANMode.Enabled() },
		func(n *api.Node, _ string) (*string, *string) {
			return &n.Spec.IPv4VXLANTunnelAddr, &n.Spec.VXLANTunnelMACAddr
		}, calc.NodeVTEPMAC},
	{"vxlanV6", true, "vxlan-v6-tunnel-addr-", "vxlanV6TunnelAddress", func(s api.IPPoolSpec) bool { return s.VXLANMode.Enabled() },
		func(n *api.Node, _ string) (*string, *string) {
			return &n.Spec.IPv6VXLANTunnelAddr, &n.Spec.VXLANTunnelMACAddrV6
		}, calc.NodeVTEPMACV6},
	{"ipip", false, "ipip-tunnel-addr-", "ipipTunnelAddress", func(s api.IPPoolSpec) bool { return s.IPIPMode.Enabled() },
		ipipFields, nil},
}

// ipipFields are spec.bgp.ipv4IPIPTunnelAddr (spec.bgp made when an
// address is to be written) and a scratch MAC.
func ipipFields(n *api.Node, want string) (*string, *string) {
	var none string
	if n.Spec.BGP == nil {
		if want == "" {
			var empty string
			return &empty, &none
		}
		n.Spec.BGP = &api.NodeBGPSpec{}
	}
	return &n.Spec.BGP.IPv4IPIPTunnelAddr, &none
}

// vxlanTunnelPools are the pools this node's VXLAN tunnel address of a
// family may come from (tunnelPools for VXLAN).
func vxlanTunnelPools(node *api.Node, pools []*api.IPPool, v6 bool) []string {
	return tunnelPools(node, pools, v6, tunnelFamilies[0].encap)
}

// tunnelPools are the pools a tunnel address may come from: enabled pools
// of the family with the encapsulation on that select the node and allow
// Tunnel use, as CIDRs, sorted. None means the node needs no address.
func tunnelPools(node *api.Node, pools []*api.IPPool, v6 bool, encap func(api.IPPoolSpec) bool) []string {
	var labels map[string]string
	if node != nil {
		labels = node.Metadata.Labels
	}
	var out []string
	for _, p := range pools {
		pfx, err := p.Prefix()
		if err != nil || pfx.Addr().Is6() != v6 || p.Spec.Disabled || !encap(p.Spec) {
			continue
		}
		uses := p.Spec.AllowedUses
		if len(uses) == 0 {
			uses = []api.IPPoolAllowedUse{api.IPPoolAllowedUseWorkload, api.IPPoolAllowedUseTunnel}
		}
		if !slices.Contains(uses, api.IPPoolAllowedUseTunnel) {
			continue
		}
		sel := p.Spec.NodeSelector
		if sel == "" {
			sel = "all()"
		}
		if s, err := selector.Parse(sel); err != nil || !s.Evaluate(labels) {
			continue
		}
		out = append(out, pfx.String())
	}
	slices.Sort(out)
	return out
}

// inPools reports whether addr lies in one of the CIDRs.
func inPools(addr netip.Addr, cidrs []string) bool {
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// TunnelAddrs keeps this node's tunnel addresses (VXLAN IPv4 and IPv6, IPIP):
// each allocated from IPAM while a pool of its family the node may use
// encapsulates, written with its VTEP MAC on the Node, released when none
// does. It runs beside the agent's loop (it does
// datastore I/O, no kernel I/O); the loop kicks it when pools or this node
// change, and it repeats each resync.
type TunnelAddrs struct {
	c    *store.Client
	ipam *ipam.Allocator
	node string
	kick chan struct{}
}

// NewTunnelAddrs keeps node's tunnel addresses through c.
func NewTunnelAddrs(c *store.Client, node string) *TunnelAddrs {
	return &TunnelAddrs{c: c, ipam: ipam.New(c), node: node, kick: make(chan struct{}, 1)}
}

// poke asks for a reconcile without blocking.
func (t *TunnelAddrs) Poke() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// run reconciles on every kick, retrying failures with a backoff.
func (t *TunnelAddrs) Run(ctx context.Context, resync time.Duration) {
	tick := time.NewTicker(resync)
	defer tick.Stop()
	wait := time.Duration(0)
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		case <-tick.C:
		case <-retry.C:
		}
		if err := t.reconcile(ctx); err != nil {
			wait = min(max(2*wait, 200*time.Millisecond), 5*time.Second)
			slog.Warn("tunnel addresses not reconciled; retrying", "err", err, "in", wait)
			retry.Reset(wait)
			continue
		}
		wait = 0
	}
}

// reconcile makes the Node's tunnel address and IPAM agree with the pools.
func (t *TunnelAddrs) reconcile(ctx context.Context) error {
	nk, _ := api.LookupKind("Node")
	pk, _ := api.LookupKind("IPPool")
	for attempt := 0; attempt < 10; attempt++ {
		r, err := t.c.GetResource(ctx, nk, "", t.node)
		if errors.Is(err, store.ErrNotFound) {
			return nil // not registered (or being removed): nothing to hold
		}
		if err != nil {
			return fmt.Errorf("reading node %s: %w", t.node, err)
		}
		n := r.(*api.Node)
		objs, _, err := t.c.ListResources(ctx, pk, "")
		if err != nil {
			return fmt.Errorf("listing IP pools: %w", err)
		}
		pools := make([]*api.IPPool, 0, len(objs))
		for _, o := range objs {
			pools = append(pools, o.(*api.IPPool))
		}
		changed := false
		var wants []any
		for _, fam := range tunnelFamilies {
			addr, err := t.address(ctx, fam, tunnelPools(n, pools, fam.v6, fam.encap))
			if err != nil {
				return err
			}
			want, mac := "", ""
			if addr.IsValid() {
				want = addr.String()
				if fam.mac != nil {
					mac = fam.mac(n, t.node)
				}
			}
			a, m := fam.fields(n, want)
			if *a != want || *m != mac {
				*a, *m, changed = want, mac, true
			}
			wants = append(wants, fam.name, want)
		}
		if !changed {
			return nil
		}
		if n.Spec.BGP != nil && *n.Spec.BGP == (api.NodeBGPSpec{}) {
			n.Spec.BGP = nil // it held only the IPIP address
		}
		_, err = t.c.UpdateResource(ctx, n)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("writing node %s tunnel addresses %v: %w", t.node, wants, err)
		}
		slog.Info("tunnel addresses", append(append([]any{"node", t.node}, wants...),
			"mac", n.Spec.VXLANTunnelMACAddr, "macV6", n.Spec.VXLANTunnelMACAddrV6)...)
		return nil
	}
	return fmt.Errorf("writing node %s tunnel address: too many conflicts", t.node)
}

// address returns the tunnel address the node should hold (invalid: none),
// allocating or releasing in IPAM as needed. An address the handle holds
// in an eligible pool is kept (across restarts); one outside them is
// released first.
func (t *TunnelAddrs) address(ctx context.Context, fam tunnelFamily, eligible []string) (netip.Addr, error) {
	handle := fam.handlePrefix + t.node
	held, err := t.ipam.IPsByHandle(ctx, handle)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading IPAM handle %s: %w", handle, err)
	}
	if len(eligible) > 0 && len(held) == 1 && held[0].Is6() == fam.v6 && inPools(held[0], eligible) {
		return held[0], nil
	}
	if len(held) > 0 {
		freed, err := t.ipam.ReleaseByHandle(ctx, handle)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("releasing IPAM handle %s: %w", handle, err)
		}
		slog.Info("released tunnel address", "node", t.node, "addresses", freed)
	}
	if len(eligible) == 0 {
		return netip.Addr{}, nil
	}
	req := ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: t.node,
		Attrs: map[string]string{ipam.AttrType: fam.attrType}, IPv4Pools: eligible, Use: api.IPPoolAllowedUseTunnel}
	if fam.v6 {
		req.Num4, req.Num6, req.IPv4Pools, req.IPv6Pools = 0, 1, nil, eligible
	}
	got, err := t.ipam.AutoAssign(ctx, req)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("allocating a tunnel address (%s) for node %s from %v: %w", handle, t.node, eligible, err)
	}
	addrs := got.Addrs()
	if len(addrs) != 1 {
		return netip.Addr{}, fmt.Errorf("allocating a tunnel address (%s) for node %s: got %v", handle, t.node, addrs)
	}
	return addrs[0], nil
}

// TunnelKick says whether an update can change this node's tunnel address.
func TunnelKick(u calc.Update, node string) bool {
	return u.Kind == "ippools" || (u.Kind == "nodes" && u.Key[strings.LastIndexByte(u.Key, '/')+1:] == node)
}
