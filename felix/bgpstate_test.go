package felix

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/store/api"
)

func testBGPState(self string, nodes ...*api.Node) *bgpState {
	b := newBGPState(self, "")
	for _, n := range nodes {
		b.nodes[n.Metadata.Name] = n
	}
	off := false
	b.configs["default"] = &api.BGPConfiguration{Spec: api.BGPConfigurationSpec{NodeToNodeMeshEnabled: &off}}
	return b
}

func testNode(i int, labels map[string]string, clusterID string) *api.Node {
	n := &api.Node{}
	n.Metadata.Name = fmt.Sprintf("node%d", i)
	n.Metadata.Labels = labels
	n.Spec.BGP = &api.NodeBGPSpec{IPv4Address: fmt.Sprintf("10.0.0.%d/24", i), RouteReflectorClusterID: clusterID}
	return n
}

func peerMap(ps []bgp.Peer) map[string]bgp.Peer {
	m := map[string]bgp.Peer{}
	for _, p := range ps {
		m[p.Address.String()] = p
	}
	return m
}

// One global BGPPeer with a peerSelector (Calico's documented route
// reflector setup): the clients peer with the reflector, and the reflector
// peers back with every client (reverse peering) as RR clients.
func TestDesiredPeersPeerSelectorReverse(t *testing.T) {
	rr := map[string]string{"route-reflector": "true"}
	nodes := []*api.Node{testNode(1, rr, "224.0.0.1"), testNode(2, nil, ""), testNode(3, nil, "")}
	bp := &api.BGPPeer{}
	bp.Metadata.Name = "to-rr"
	bp.Spec.PeerSelector = "has(route-reflector)"

	b1 := testBGPState("node1", nodes...)
	b1.peers["to-rr"] = bp
	got := peerMap(b1.desiredPeers(179))
	if len(got) != 2 {
		t.Fatalf("reflector peers: %+v", got)
	}
	for _, a := range []string{"10.0.0.2", "10.0.0.3"} {
		p, ok := got[a]
		if !ok || !p.RouteReflectorClient || p.ClusterID != netip.MustParseAddr("224.0.0.1") || p.Type != peerNode || p.Passive {
			t.Errorf("reflector's peer %s: %+v", a, p)
		}
	}

	b2 := testBGPState("node2", nodes...)
	b2.peers["to-rr"] = bp
	got = peerMap(b2.desiredPeers(179))
	p, ok := got["10.0.0.1"]
	if len(got) != 1 || !ok || p.RouteReflectorClient || p.Type != peerGlobal || !p.Passive {
		t.Errorf("client peers: %+v", got)
	}
}

// A node-specific BGPPeer whose peerIP is another Calico node: that node
// peers back, and only the lower address dials.
func TestDesiredPeersPeerIPReverse(t *testing.T) {
	nodes := []*api.Node{testNode(1, nil, ""), testNode(2, nil, ""), testNode(3, nil, "")}
	bp := &api.BGPPeer{}
	bp.Metadata.Name = "n3-n1"
	bp.Spec.Node, bp.Spec.PeerIP = "node3", "10.0.0.1"

	for _, c := range []struct {
		node    string
		want    string
		passive bool
	}{{"node3", "10.0.0.1", true}, {"node1", "10.0.0.3", false}, {"node2", "", false}} {
		b := testBGPState(c.node, nodes...)
		b.peers[bp.Metadata.Name] = bp
		got := peerMap(b.desiredPeers(179))
		if c.want == "" {
			if len(got) != 0 {
				t.Errorf("%s: unexpected peers %+v", c.node, got)
			}
			continue
		}
		p, ok := got[c.want]
		if len(got) != 1 || !ok || p.Passive != c.passive || p.Type != peerNode {
			t.Errorf("%s: peers %+v", c.node, got)
		}
	}

	// A different AS in the BGPPeer names an external router, not node1.
	bp.Spec.ASNumber = 65000
	b := testBGPState("node1", nodes...)
	b.peers[bp.Metadata.Name] = bp
	if got := b.desiredPeers(179); len(got) != 0 {
		t.Errorf("AS mismatch still reversed: %+v", got)
	}
}
