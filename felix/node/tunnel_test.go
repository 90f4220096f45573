package node

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

func TestVXLANTunnelPools(t *testing.T) {
	mk := func(name, cidr string, mode api.VXLANMode, sel string, uses ...api.IPPoolAllowedUse) *api.IPPool {
		p := &api.IPPool{Metadata: api.ObjectMeta{Name: name}, Spec: api.IPPoolSpec{CIDR: cidr, VXLANMode: mode, NodeSelector: sel, AllowedUses: uses}}
		p.Default()
		return p
	}
	node := &api.Node{Metadata: api.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}
	disabled := mk("off", "10.5.0.0/16", api.VXLANModeAlways, "")
	disabled.Spec.Disabled = true
	pools := []*api.IPPool{
		mk("always", "10.1.0.0/16", api.VXLANModeAlways, ""),
		mk("cross", "10.2.0.0/16", api.VXLANModeCrossSubnet, "zone == 'a'"),
		mk("never", "10.3.0.0/16", api.VXLANModeNever, ""),
		mk("otherzone", "10.4.0.0/16", api.VXLANModeAlways, "zone == 'b'"),
		disabled,
		mk("workloadonly", "10.6.0.0/16", api.VXLANModeAlways, "", api.IPPoolAllowedUseWorkload),
		mk("tunnelonly", "10.7.0.0/16", api.VXLANModeAlways, "", api.IPPoolAllowedUseTunnel),
		mk("v6", "fd00:1::/48", api.VXLANModeAlways, ""),
	}
	got := vxlanTunnelPools(node, pools, false)
	if want := []string{"10.1.0.0/16", "10.2.0.0/16", "10.7.0.0/16"}; !slices.Equal(got, want) {
		t.Fatalf("eligible IPv4 pools %v, want %v", got, want)
	}
	if got := vxlanTunnelPools(node, pools, true); !slices.Equal(got, []string{"fd00:1::/48"}) {
		t.Fatalf("eligible IPv6 pools %v", got)
	}
}

// A node gets its VXLAN tunnel address from IPAM (Calico's handle and
// attributes) when a pool it may use encapsulates, keeps it (and its MAC)
// across reconciles and restarts, moves it when its pool stops being
// eligible, and frees it when no pool encapsulates.
func TestTunnelAddrLifecycle(t *testing.T) {
	ctx := context.Background()
	cl := storetest.StartEtcd(t).Client(t)
	rs := resourceStore{t, cl}
	put, getNode := rs.put, func() *api.Node { return rs.node("n1") }
	pool := func(name, cidr string, mode api.VXLANMode) *api.IPPool {
		return &api.IPPool{TypeMeta: api.TypeMeta{Kind: "IPPool", APIVersion: api.APIVersion},
			Metadata: api.ObjectMeta{Name: name}, Spec: api.IPPoolSpec{CIDR: cidr, VXLANMode: mode}}
	}
	put(&api.Node{TypeMeta: api.TypeMeta{Kind: "Node", APIVersion: api.APIVersion}, Metadata: api.ObjectMeta{Name: "n1"},
		Spec: api.NodeSpec{BGP: &api.NodeBGPSpec{IPv4Address: "192.0.2.1/24"}}})
	put(pool("flat", "10.9.0.0/16", api.VXLANModeNever))
	ta := NewTunnelAddrs(cl, "n1")
	reconcile := func() {
		t.Helper()
		if err := ta.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a := ipam.New(cl)
	handleOf := func(h string) []netip.Addr {
		t.Helper()
		got, err := a.IPsByHandle(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	handle := func() []netip.Addr { return handleOf("vxlan-tunnel-addr-n1") }
	reconcile()
	if n := getNode(); n.Spec.IPv4VXLANTunnelAddr != "" || len(handle()) != 0 {
		t.Fatalf("no pool encapsulates, yet tunnel address %q, handle %v", n.Spec.IPv4VXLANTunnelAddr, handle())
	}

	put(pool("vx", "10.65.0.0/16", api.VXLANModeAlways))
	reconcile()
	n := getNode()
	addr, err := netip.ParseAddr(n.Spec.IPv4VXLANTunnelAddr)
	if err != nil || !netip.MustParsePrefix("10.65.0.0/16").Contains(addr) {
		t.Fatalf("tunnel address %q not from the VXLAN pool", n.Spec.IPv4VXLANTunnelAddr)
	}
	if n.Spec.VXLANTunnelMACAddr != calc.DerivedVTEPMAC("n1") {
		t.Fatalf("MAC %q, want %s", n.Spec.VXLANTunnelMACAddr, calc.DerivedVTEPMAC("n1"))
	}
	if h := handle(); !slices.Equal(h, []netip.Addr{addr}) {
		t.Fatalf("handle holds %v, want [%s]", h, addr)
	}
	// Calico's attributes on the allocation.
	blocks, err := a.ListBlocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range blocks {
		for _, al := range b.Allocations() {
			if al.Addr == addr {
				found = true
				if al.Handle != "vxlan-tunnel-addr-n1" || al.Attrs[ipam.AttrNode] != "n1" || al.Attrs[ipam.AttrType] != "vxlanTunnelAddress" {
					t.Fatalf("allocation %+v, want handle vxlan-tunnel-addr-n1, node n1, type vxlanTunnelAddress", al)
				}
			}
		}
	}
	if !found {
		t.Fatalf("tunnel address %s not allocated in any block", addr)
	}

	// A restarted agent (a new allocator) keeps address and MAC.
	ta = NewTunnelAddrs(cl, "n1")
	reconcile()
	if n2 := getNode(); n2.Spec.IPv4VXLANTunnelAddr != addr.String() || n2.Spec.VXLANTunnelMACAddr != n.Spec.VXLANTunnelMACAddr ||
		n2.Metadata.ResourceVersion != n.Metadata.ResourceVersion {
		t.Fatalf("after a restart: %q %q (rev %s), want %s %s unchanged (rev %s)", n2.Spec.IPv4VXLANTunnelAddr, n2.Spec.VXLANTunnelMACAddr,
			n2.Metadata.ResourceVersion, addr, n.Spec.VXLANTunnelMACAddr, n.Metadata.ResourceVersion)
	}

	// The pool stops allowing Tunnel use; another pool encapsulates: the
	// address moves there.
	vx := pool("vx", "10.65.0.0/16", api.VXLANModeAlways)
	vx.Spec.AllowedUses = []api.IPPoolAllowedUse{api.IPPoolAllowedUseWorkload}
	put(vx)
	put(pool("vx2", "10.66.0.0/16", api.VXLANModeCrossSubnet))
	reconcile()
	moved, _ := netip.ParseAddr(getNode().Spec.IPv4VXLANTunnelAddr)
	if !netip.MustParsePrefix("10.66.0.0/16").Contains(moved) || !slices.Equal(handle(), []netip.Addr{moved}) {
		t.Fatalf("after the pool lost Tunnel use: address %s, handle %v; want one in 10.66.0.0/16", moved, handle())
	}

	// An IPv6 pool encapsulates: the IPv6 tunnel address and MAC too.
	put(pool("vx6", "fd00:65::/64", api.VXLANModeAlways))
	reconcile()
	n6 := getNode()
	a6, err := netip.ParseAddr(n6.Spec.IPv6VXLANTunnelAddr)
	if err != nil || !netip.MustParsePrefix("fd00:65::/64").Contains(a6) || n6.Spec.VXLANTunnelMACAddrV6 != calc.DerivedVTEPMAC("n1-v6") ||
		!slices.Equal(handleOf("vxlan-v6-tunnel-addr-n1"), []netip.Addr{a6}) || n6.Spec.IPv4VXLANTunnelAddr != moved.String() {
		t.Fatalf("IPv6 pool: node %+v, v6 handle %v", n6.Spec, handleOf("vxlan-v6-tunnel-addr-n1"))
	}
	checkAttrs := func(addr netip.Addr, handle, typ string) {
		t.Helper()
		blocks, err := a.ListBlocks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			for _, al := range b.Allocations() {
				if al.Addr == addr {
					if al.Handle != handle || al.Attrs[ipam.AttrNode] != "n1" || al.Attrs[ipam.AttrType] != typ {
						t.Fatalf("allocation %+v, want handle %s, node n1, type %s", al, handle, typ)
					}
					return
				}
			}
		}
		t.Fatalf("%s not allocated", addr)
	}
	checkAttrs(a6, "vxlan-v6-tunnel-addr-n1", "vxlanV6TunnelAddress")
	put(pool("vx6", "fd00:65::/64", api.VXLANModeNever))
	reconcile()
	if n := getNode(); n.Spec.IPv6VXLANTunnelAddr != "" || n.Spec.VXLANTunnelMACAddrV6 != "" || len(handleOf("vxlan-v6-tunnel-addr-n1")) != 0 ||
		n.Spec.IPv4VXLANTunnelAddr != moved.String() {
		t.Fatalf("IPv6 pool off: node %+v", n.Spec)
	}

	// No pool encapsulates: released and cleared.
	put(pool("vx", "10.65.0.0/16", api.VXLANModeNever))
	put(pool("vx2", "10.66.0.0/16", api.VXLANModeNever))
	reconcile()
	if n := getNode(); n.Spec.IPv4VXLANTunnelAddr != "" || n.Spec.VXLANTunnelMACAddr != "" || len(handle()) != 0 {
		t.Fatalf("encapsulation off, yet address %q MAC %q handle %v", n.Spec.IPv4VXLANTunnelAddr, n.Spec.VXLANTunnelMACAddr, handle())
	}
}

// resourceStore writes and reads resources for the tunnel address tests.
type resourceStore struct {
	t  *testing.T
	cl *store.Client
}

func (s resourceStore) put(r api.Resource) {
	s.t.Helper()
	if _, err := s.cl.ApplyResource(context.Background(), r); err != nil {
		s.t.Fatal(err)
	}
}

func (s resourceStore) node(name string) *api.Node {
	s.t.Helper()
	k, _ := api.LookupKind("Node")
	r, err := s.cl.GetResource(context.Background(), k, "", name)
	if err != nil {
		s.t.Fatal(err)
	}
	return r.(*api.Node)
}
