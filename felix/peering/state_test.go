package peering

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/bgp"
	"github.com/calico-aio/calico-aio/store/api"
)

func testBGPState(self string, nodes ...*api.Node) *State {
	b := NewState(self, "")
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

// A BGPPeer's keepaliveTime and maxRestartTime reach the speaker's peer,
// BGPConfiguration listenPort is the port peers are dialled on, and a
// password secret that is missing drops the peering unless it is optional
// (then: no password).
func TestDesiredPeersTimersPortAndSecrets(t *testing.T) {
	nodes := []*api.Node{testNode(1, nil, ""), testNode(2, nil, "")}
	secrets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "bgp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "bgp", "pw"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	peer := func(name, ip, key string, optional *bool) *api.BGPPeer {
		bp := &api.BGPPeer{}
		bp.Metadata.Name = name
		bp.Spec.PeerIP, bp.Spec.ASNumber = ip, 64999
		bp.Spec.KeepaliveTime = &api.Duration{Duration: 7 * time.Second}
		bp.Spec.MaxRestartTime = &api.Duration{Duration: 45 * time.Second}
		if key != "" {
			bp.Spec.Password = &api.BGPPassword{SecretKeyRef: &api.SecretKeySelector{Name: "bgp", Key: key, Optional: optional}}
		}
		return bp
	}
	b := testBGPState("node1", nodes...)
	b.secretsDir = secrets
	b.configs["default"].Spec.ListenPort = 1790
	for _, bp := range []*api.BGPPeer{
		peer("with-secret", "192.0.2.1", "pw", nil),
		peer("missing-required", "192.0.2.2", "nope", &no),
		peer("missing-default", "192.0.2.3", "nope", nil),
		peer("missing-optional", "192.0.2.4", "nope", &yes),
	} {
		b.peers[bp.Metadata.Name] = bp
	}
	got := peerMap(b.desiredPeers(b.listenPort(179)))
	if len(got) != 2 {
		t.Fatalf("peers %+v: want the one with its secret and the optional one", got)
	}
	withSecret, optional := got["192.0.2.1"], got["192.0.2.4"]
	if withSecret.Password != "s3cret" || optional.Password != "" {
		t.Errorf("passwords %q and %q, want s3cret and none", withSecret.Password, optional.Password)
	}
	for _, p := range []bgp.Peer{withSecret, optional} {
		if p.KeepaliveTime != 7*time.Second || p.MaxRestartTime != 45*time.Second || p.Port != 1790 {
			t.Errorf("peer %s: keepalive %v, max restart %v, port %d; want 7s, 45s, 1790", p.Address, p.KeepaliveTime, p.MaxRestartTime, p.Port)
		}
	}
	if b.listenPort(179) != 1790 {
		t.Errorf("listen port %d, want 1790", b.listenPort(179))
	}
}
