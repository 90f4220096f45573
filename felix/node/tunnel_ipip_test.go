package node

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// A node gets its IPIP tunnel address (Calico's handle ipip-tunnel-addr-
// <node>, type ipipTunnelAddress) into spec.bgp.ipv4IPIPTunnelAddr while
// an IPv4 pool selecting it has ipipMode Always or CrossSubnet, keeps it
// across a restart, keeps it apart from the VXLAN one, and frees it when
// no pool selecting it encapsulates with IP-in-IP.
func TestIPIPTunnelAddrLifecycle(t *testing.T) {
	ctx := context.Background()
	cl := storetest.StartEtcd(t).Client(t)
	rs := resourceStore{t, cl}
	put, getNode := rs.put, func() *api.Node { return rs.node("n1") }
	ipipAddr := func() string {
		if b := getNode().Spec.BGP; b != nil {
			return b.IPv4IPIPTunnelAddr
		}
		return ""
	}
	pool := func(name, cidr string, mode api.IPIPMode, sel string) *api.IPPool {
		return &api.IPPool{TypeMeta: api.TypeMeta{Kind: "IPPool", APIVersion: api.APIVersion},
			Metadata: api.ObjectMeta{Name: name}, Spec: api.IPPoolSpec{CIDR: cidr, IPIPMode: mode, NodeSelector: sel}}
	}
	put(&api.Node{TypeMeta: api.TypeMeta{Kind: "Node", APIVersion: api.APIVersion},
		Metadata: api.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Spec:     api.NodeSpec{BGP: &api.NodeBGPSpec{IPv4Address: "192.0.2.1/24"}}})
	a := ipam.New(cl)
	handle := func() []netip.Addr {
		t.Helper()
		got, err := a.IPsByHandle(ctx, "ipip-tunnel-addr-n1")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	ta := NewTunnelAddrs(cl, "n1")
	reconcile := func() {
		t.Helper()
		if err := ta.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// An IPIP pool that selects another zone only: no address.
	put(pool("other", "10.70.0.0/16", api.IPIPModeAlways, "zone == 'b'"))
	reconcile()
	if got := ipipAddr(); got != "" || len(handle()) != 0 {
		t.Fatalf("no IPIP pool selects the node, yet address %q handle %v", got, handle())
	}

	put(pool("ipip", "10.71.0.0/16", api.IPIPModeCrossSubnet, "zone == 'a'"))
	reconcile()
	n := getNode()
	addr, err := netip.ParseAddr(n.Spec.BGP.IPv4IPIPTunnelAddr)
	if err != nil || !netip.MustParsePrefix("10.71.0.0/16").Contains(addr) {
		t.Fatalf("IPIP tunnel address %q not from the IPIP pool selecting the node", n.Spec.BGP.IPv4IPIPTunnelAddr)
	}
	if n.Spec.IPv4VXLANTunnelAddr != "" || n.Spec.BGP.IPv4Address != "192.0.2.1/24" {
		t.Fatalf("node spec changed beyond the IPIP address: %+v %+v", n.Spec, *n.Spec.BGP)
	}
	if h := handle(); !slices.Equal(h, []netip.Addr{addr}) {
		t.Fatalf("handle ipip-tunnel-addr-n1 holds %v, want [%s]", h, addr)
	}
	blocks, err := a.ListBlocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]string
	for _, b := range blocks {
		for _, al := range b.Allocations() {
			if al.Addr == addr {
				attrs = al.Attrs
			}
		}
	}
	if attrs[ipam.AttrNode] != "n1" || attrs[ipam.AttrType] != "ipipTunnelAddress" {
		t.Fatalf("allocation attributes %v, want node n1, type ipipTunnelAddress", attrs)
	}

	// Restart: kept, Node not rewritten.
	ta = NewTunnelAddrs(cl, "n1")
	reconcile()
	if n2 := getNode(); n2.Spec.BGP.IPv4IPIPTunnelAddr != addr.String() || n2.Metadata.ResourceVersion != n.Metadata.ResourceVersion {
		t.Fatalf("after a restart: %q (rev %s), want %s (rev %s)", n2.Spec.BGP.IPv4IPIPTunnelAddr, n2.Metadata.ResourceVersion, addr, n.Metadata.ResourceVersion)
	}

	// A VXLAN pool as well: both addresses, each under its own handle.
	vx := pool("vx", "10.72.0.0/16", api.IPIPModeNever, "")
	vx.Spec.VXLANMode = api.VXLANModeAlways
	put(vx)
	reconcile()
	if n := getNode(); n.Spec.BGP.IPv4IPIPTunnelAddr != addr.String() || n.Spec.IPv4VXLANTunnelAddr == "" {
		t.Fatalf("with a VXLAN pool too: IPIP %q, VXLAN %q", n.Spec.BGP.IPv4IPIPTunnelAddr, n.Spec.IPv4VXLANTunnelAddr)
	}

	// IP-in-IP off: released and cleared; VXLAN's stays.
	put(pool("ipip", "10.71.0.0/16", api.IPIPModeNever, "zone == 'a'"))
	reconcile()
	if n := getNode(); n.Spec.BGP.IPv4IPIPTunnelAddr != "" || len(handle()) != 0 || n.Spec.IPv4VXLANTunnelAddr == "" {
		t.Fatalf("IPIP off: address %q, handle %v, VXLAN %q", n.Spec.BGP.IPv4IPIPTunnelAddr, handle(), n.Spec.IPv4VXLANTunnelAddr)
	}
}
