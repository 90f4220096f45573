package felix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/selector"
)

// Calico's IPAM handle and allocation type of a node's IPv4 VXLAN tunnel
// address (calico-node -allocate-tunnel-addrs writes the same).
const (
	vxlanTunnelHandlePrefix = "vxlan-tunnel-addr-"
	vxlanTunnelAttrType     = "vxlanTunnelAddress"
)

func vxlanTunnelHandle(node string) string { return vxlanTunnelHandlePrefix + node }

// vxlanTunnelPools are the pools this node's VXLAN tunnel address may come
// from: enabled IPv4 pools with VXLAN on that select the node and allow
// Tunnel use, as CIDRs, sorted. None means the node needs no address.
func vxlanTunnelPools(node *api.Node, pools []*api.IPPool) []string {
	var labels map[string]string
	if node != nil {
		labels = node.Metadata.Labels
	}
	var out []string
	for _, p := range pools {
		pfx, err := p.Prefix()
		if err != nil || !pfx.Addr().Is4() || p.Spec.Disabled || !p.Spec.VXLANMode.Enabled() {
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

// tunnelAddrs keeps this node's VXLAN tunnel address: allocated from IPAM
// while a pool it may use encapsulates, written with the VTEP MAC on its
// Node, released when none does. It runs beside the agent's loop (it does
// datastore I/O, no kernel I/O); the loop kicks it when pools or this node
// change, and it repeats each resync.
type tunnelAddrs struct {
	c    *store.Client
	ipam *ipam.Allocator
	node string
	kick chan struct{}
}

func newTunnelAddrs(c *store.Client, node string) *tunnelAddrs {
	return &tunnelAddrs{c: c, ipam: ipam.New(c), node: node, kick: make(chan struct{}, 1)}
}

// poke asks for a reconcile without blocking.
func (t *tunnelAddrs) poke() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// run reconciles on every kick, retrying failures with a backoff.
func (t *tunnelAddrs) run(ctx context.Context, resync time.Duration) {
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
			slog.Warn("VXLAN tunnel address not reconciled; retrying", "err", err, "in", wait)
			retry.Reset(wait)
			continue
		}
		wait = 0
	}
}

// reconcile makes the Node's tunnel address and IPAM agree with the pools.
func (t *tunnelAddrs) reconcile(ctx context.Context) error {
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
		eligible := vxlanTunnelPools(n, pools)
		addr, err := t.address(ctx, n, eligible)
		if err != nil {
			return err
		}
		mac := ""
		if addr.IsValid() {
			mac = calc.NodeVTEPMAC(n, t.node)
		}
		want := ""
		if addr.IsValid() {
			want = addr.String()
		}
		if n.Spec.IPv4VXLANTunnelAddr == want && n.Spec.VXLANTunnelMACAddr == mac {
			return nil
		}
		n.Spec.IPv4VXLANTunnelAddr, n.Spec.VXLANTunnelMACAddr = want, mac
		_, err = t.c.UpdateResource(ctx, n)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("writing node %s spec.ipv4VXLANTunnelAddr %q: %w", t.node, want, err)
		}
		slog.Info("VXLAN tunnel address", "node", t.node, "address", want, "mac", mac)
		return nil
	}
	return fmt.Errorf("writing node %s tunnel address: too many conflicts", t.node)
}

// address returns the tunnel address the node should hold (invalid: none),
// allocating or releasing in IPAM as needed. An address the handle holds
// in an eligible pool is kept (across restarts); one outside them is
// released first.
func (t *tunnelAddrs) address(ctx context.Context, n *api.Node, eligible []string) (netip.Addr, error) {
	handle := vxlanTunnelHandle(t.node)
	held, err := t.ipam.IPsByHandle(ctx, handle)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading IPAM handle %s: %w", handle, err)
	}
	var v4 []netip.Addr
	for _, a := range held {
		if a.Is4() {
			v4 = append(v4, a)
		}
	}
	if len(eligible) > 0 && len(v4) == 1 && inPools(v4[0], eligible) {
		return v4[0], nil
	}
	if len(v4) > 0 {
		freed, err := t.ipam.ReleaseByHandle(ctx, handle)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("releasing IPAM handle %s: %w", handle, err)
		}
		slog.Info("released VXLAN tunnel address", "node", t.node, "addresses", freed)
	}
	if len(eligible) == 0 {
		return netip.Addr{}, nil
	}
	got, err := t.ipam.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: t.node,
		Attrs: map[string]string{ipam.AttrType: vxlanTunnelAttrType}, IPv4Pools: eligible, Use: api.IPPoolAllowedUseTunnel})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("allocating a VXLAN tunnel address for node %s from %v: %w", t.node, eligible, err)
	}
	if len(got.IPv4) != 1 {
		return netip.Addr{}, fmt.Errorf("allocating a VXLAN tunnel address for node %s: got %v", t.node, got.IPv4)
	}
	return got.IPv4[0].Addr(), nil
}

// tunnelKick says whether an update can change this node's tunnel address.
func tunnelKick(u calc.Update, node string) bool {
	return u.Kind == "ippools" || (u.Kind == "nodes" && keyName(u.Key) == node)
}
