package ctl_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
)

// ipamText renders IPAM: every allocation (address, handle, node), every
// affinity and every handle, sorted.
func (h *harness) ipamText() string {
	h.t.Helper()
	a := ipam.New(h.cli)
	var lines []string
	blocks, err := a.ListBlocks(bg)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, b := range blocks {
		host := b.Block.Host()
		lines = append(lines, fmt.Sprintf("block %s host %q", b.Prefix, host))
		for _, al := range b.Allocations() {
			lines = append(lines, fmt.Sprintf("alloc %s handle %s node %s", al.Addr, al.Handle, al.Attrs[ipam.AttrNode]))
		}
	}
	affs, err := a.ListAffinities(bg)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, af := range affs {
		lines = append(lines, fmt.Sprintf("affinity %s %s", af.Node, af.CIDR))
	}
	handles, err := a.ListHandles(bg)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, hd := range handles {
		lines = append(lines, "handle "+hd.ID)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// "calicoctl delete node" releases the node's IPAM as Calico's does: its
// workload endpoints' addresses (and the endpoints), its IPIP and VXLAN
// tunnel addresses, its block affinities (empty blocks go, a block still
// holding another node's address stays without affinity), and deletes its
// BGPPeers and node.<name> configurations; another node's state stays.
func TestDeleteNodeReleasesIPAM(t *testing.T) {
	h := newHarness(t)
	h.mustRun(`apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: p}
spec: {cidr: 10.80.0.0/16, blockSize: 26, ipipMode: Always}
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: vx}
spec: {cidr: 10.81.0.0/16, blockSize: 26, vxlanMode: Always}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: n1-peer}
spec: {node: n1, peerIP: 192.0.2.9, asNumber: 64512}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: n2-peer}
spec: {node: n2, peerIP: 192.0.2.9, asNumber: 64512}
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: node.n1}
spec: {ipipMTU: 1400}
---
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: node.n1}
spec: {listenPort: 1790}
`, "create", "-f", "-")
	a := ipam.New(h.cli)
	assign := func(node, handle, typ, pool string) string {
		t.Helper()
		attrs := map[string]string{}
		if typ != "" {
			attrs[ipam.AttrType] = typ
		}
		use := api.IPPoolAllowedUseWorkload
		if typ != "" {
			use = api.IPPoolAllowedUseTunnel
		}
		got, err := a.AutoAssign(bg, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Node: node, Attrs: attrs, IPv4Pools: []string{pool}, Use: use})
		if err != nil {
			t.Fatal(err)
		}
		return got.Addrs()[0].String()
	}
	pod1 := assign("n1", "k8s-pod-network.c1", "", "10.80.0.0/16")
	ipip1 := assign("n1", "ipip-tunnel-addr-n1", "ipipTunnelAddress", "10.80.0.0/16")
	vx1 := assign("n1", "vxlan-tunnel-addr-n1", "vxlanTunnelAddress", "10.81.0.0/16")
	pod2 := assign("n2", "k8s-pod-network.c2", "", "10.80.0.0/16")
	// n2 borrows from n1's block: that block must stay, unaffined.
	b := netip.MustParsePrefix(pod1 + "/26").Masked()
	borrowed, err := a.AssignIP(bg, ipam.AssignIPArgs{Addr: b.Addr().Next().Next().Next().Next().Next(), HandleID: "k8s-pod-network.c3", Node: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := api.LookupKind("Node")
	node := func(name, addr, ipip, vx string) {
		n := k.NewObject().(*api.Node)
		n.Metadata.Name = name
		n.Spec.BGP = &api.NodeBGPSpec{IPv4Address: addr, IPv4IPIPTunnelAddr: ipip}
		n.Spec.IPv4VXLANTunnelAddr = vx
		if _, err := h.cli.CreateResource(bg, n); err != nil {
			t.Fatal(err)
		}
	}
	node("n1", "192.0.2.1/24", ipip1, vx1)
	node("n2", "192.0.2.2/24", "", "")
	h.wep("c1", "n1", pod1+"/32")
	h.wep("c2", "n2", pod2+"/32")

	if out := h.mustRun("", "delete", "node", "n1"); out != "Successfully deleted 1 'Node' resource(s)\n" {
		t.Fatalf("delete node output %q", out)
	}
	block2 := netip.MustParsePrefix(pod2 + "/26").Masked()
	wantLines := []string{
		"affinity n2 " + block2.String(),
		fmt.Sprintf("alloc %s handle k8s-pod-network.c3 node n2", borrowed.Addr()),
		fmt.Sprintf("alloc %s handle k8s-pod-network.c2 node n2", pod2),
		fmt.Sprintf("block %s host \"\"", b),
		fmt.Sprintf("block %s host \"n2\"", block2),
		"handle k8s-pod-network.c2",
		"handle k8s-pod-network.c3",
	}
	slices.Sort(wantLines)
	want := strings.Join(wantLines, "\n") + "\n"
	if got := h.ipamText(); got != want {
		t.Errorf("IPAM after deleting n1:\n%s\nwant:\n%s", got, want)
	}
	var keys []string
	for _, key := range h.resourceKeys() {
		if !strings.Contains(key, "/ippools/") && !strings.Contains(key, "/clusterinformations/") && !strings.Contains(key, "/tiers/") {
			keys = append(keys, key[strings.Index(key, "projectcalico.org/")+len("projectcalico.org/"):])
		}
	}
	if got := strings.Join(keys, " "); got != "bgppeers/n2-peer nodes/n2 workloadendpoints/default/c2" {
		t.Errorf("resources left: %s", got)
	}
	// Deleting it again: not found, as calicoctl says.
	if _, errs, code := h.run("", "delete", "node", "n1"); code == 0 || !strings.Contains(errs, "resource does not exist: Node(n1)") {
		t.Errorf("second delete: exit %d, %s", code, errs)
	}
}
