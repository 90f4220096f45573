package e2e

import (
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// Mesh off, node1 made a route reflector after it registered (cluster ID
// and label), one global BGPPeer with peerSelector has(route-reflector):
// node2 and node3 peer only with node1 (type global), node1 peers back with
// both (the reverse peering, type node specific), and pods on node2 and
// node3 reach each other over routes node1 reflects with the original next
// hops.
func TestClusterRouteReflectorMeshOff(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "10.254.0")
	createPool(t, c.cl, "pool", "10.124.0.0/16", 26)
	c.setMesh(false)
	c.addBGPPeer("peer-with-rrs", api.BGPPeerSpec{PeerSelector: "has(route-reflector)"})
	c.startAll()
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	// Nobody is selected yet, and there is no mesh: no peers at all.
	for _, nd := range c.nodes {
		nd.peersAre(t, 10*time.Second, map[string]string{})
	}

	c.editNode("node1", func(n *api.Node) {
		if n.Metadata.Labels == nil {
			n.Metadata.Labels = map[string]string{}
		}
		n.Metadata.Labels["route-reflector"] = "true"
		n.Spec.BGP.RouteReflectorClusterID = "224.0.0.1"
	})
	out := n1.peersAre(t, 30*time.Second, map[string]string{n2.ip: "node specific", n3.ip: "node specific"})
	t.Logf("calicoctl node status on the reflector:\n%s", out)
	out = n2.peersAre(t, 30*time.Second, map[string]string{n1.ip: "global"})
	t.Logf("calicoctl node status on a client:\n%s", out)
	n3.peersAre(t, 30*time.Second, map[string]string{n1.ip: "global"})

	p1, p2, p3 := n1.pod("net", "rr1"), n2.pod("net", "rr2"), n3.pod("net", "rr3")
	b1, b2, b3 := blockOf(p1.ip, 26), blockOf(p2.ip, 26), blockOf(p3.ip, 26)
	// Reflected: the clients learn each other's blocks through node1 with
	// the next hop unchanged.
	eventually(t, 20*time.Second, "node2 learns node3's block (reflected)", n2.routeVia(b3, n3.ip))
	eventually(t, 20*time.Second, "node3 learns node2's block (reflected)", n3.routeVia(b2, n2.ip))
	eventually(t, 20*time.Second, "node2 learns node1's block", n2.routeVia(b1, n1.ip))
	eventually(t, 20*time.Second, "node1 learns node3's block", n1.routeVia(b3, n3.ip))
	eventually(t, 15*time.Second, "pod on node2 -> pod on node3", reachable(p2.ns, p3.ip))
	eventually(t, 15*time.Second, "pod on node3 -> pod on node2", reachable(p3.ns, p2.ip))
	eventually(t, 15*time.Second, "pod on node1 -> pod on node3", reachable(p1.ns, p3.ip))

}

// A /26 pool of one /26 block: node1 claims the block, node2 and node3 must
// borrow from it. Each borrowing node advertises a /32 for its pod; node1
// and node3 route node2's borrowed address via node2 (more specific than
// node1's block), pods on all three nodes reach each other, and the /32
// is withdrawn when the pod goes.
func TestClusterBorrowedAddressReachable(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "10.255.0")
	createPool(t, c.cl, "pool", "10.125.0.0/26", 26)
	c.startAll()
	c.waitMesh(2)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	p1 := n1.pod("net", "own1")
	p2 := n2.pod("net", "borrow2")
	p3 := n3.pod("net", "borrow3")
	block := blockOf(p1.ip, 26)
	if blockOf(p2.ip, 26) != block || blockOf(p3.ip, 26) != block {
		t.Fatalf("want every pod in node1's block %s: %s %s %s", block, p1.ip, p2.ip, p3.ip)
	}
	eventually(t, 20*time.Second, "node2 learns node1's block", n2.routeVia(block, n1.ip))
	eventually(t, 20*time.Second, "node3 learns node1's block", n3.routeVia(block, n1.ip))
	eventually(t, 20*time.Second, "node1 routes node2's borrowed address via node2", n1.routeVia(p2.ip+"/32", n2.ip))
	eventually(t, 20*time.Second, "node3 routes node2's borrowed address via node2", n3.routeVia(p2.ip+"/32", n2.ip))
	eventually(t, 20*time.Second, "node1 routes node3's borrowed address via node3", n1.routeVia(p3.ip+"/32", n3.ip))
	eventually(t, 20*time.Second, "node2 routes node3's borrowed address via node3", n2.routeVia(p3.ip+"/32", n3.ip))

	eventually(t, 15*time.Second, "node1 pod -> borrowed pod on node2", reachable(p1.ns, p2.ip))
	eventually(t, 15*time.Second, "borrowed pod on node3 -> borrowed pod on node2", reachable(p3.ns, p2.ip))
	eventually(t, 15*time.Second, "borrowed pod on node2 -> node1 pod", reachable(p2.ns, p1.ip))
	eventually(t, 15*time.Second, "node1 pod -> borrowed pod on node3", reachable(p1.ns, p3.ip))

	// The borrowed pod goes: node2 withdraws its /32 everywhere.
	n2.delPod("net", p2)
	eventually(t, 15*time.Second, "node1 drops node2's /32", n1.noRoute(p2.ip+"/32"))
	eventually(t, 15*time.Second, "node3 drops node2's /32", n3.noRoute(p2.ip+"/32"))
	if err := n1.routeVia(p3.ip+"/32", n3.ip)(); err != nil {
		t.Error(err)
	}
}
