package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// NAT outgoing over VXLAN (issue #14, "NAT outgoing still works"): node1
// in 10.251.1.0/24, node2 in 10.251.2.0/24, BGP off, a natOutgoing pool
// with vxlanMode Always. Beyond the router, in 10.251.9.0/24, an "outside"
// namespace that, like the router, has no route to the pods.
//   - a pod on each node reaches the outside with its source NATed to its
//     node's address (nothing else could answer it: no route to the pods);
//   - pod to pod across the tunnel keeps the pods' own addresses, and the
//     router sees it as UDP 4789 between the nodes;
//   - natOutgoing off: the outside no longer gets the pods' connections
//     (their replies have nowhere to go); on again: NATed again.
func TestOverlayVXLANNATOutgoing(t *testing.T) {
	t.Setenv("CALICO_NETWORKING_BACKEND", "vxlan")
	c := newTwoSubnetCluster(t, 1, 2)
	n1, n2 := c.nodes[0], c.nodes[1]

	out := newNS(t)
	const outIP, outGW = overlayNet + ".9.1", overlayNet + ".9." + bridgeIP
	mustNS(t, c.br, "ip", "link", "add", "out", "type", "veth", "peer", "name", "eth0", "netns", nsName(out))
	mustNS(t, c.br, "ip", "addr", "add", outGW+"/24", "dev", "out")
	mustNS(t, c.br, "ip", "link", "set", "out", "up")
	mustNS(t, out, "ip", "link", "set", "lo", "up")
	mustNS(t, out, "ip", "addr", "add", outIP+"/24", "dev", "eth0")
	mustNS(t, out, "ip", "link", "set", "eth0", "up")
	mustNS(t, out, "ip", "route", "add", "default", "via", outGW)
	listenPeer(t, out, hostPort(outIP, 8080))

	createPool(t, c.cl, "vx", "10.134.0.0/16", 26)
	updateOverlayPool(t, c, "vx", func(p *api.IPPool) { p.Spec.VXLANMode, p.Spec.NATOutgoing = api.VXLANModeAlways, true })
	c.observeVXLAN(4789)
	c.startAll()
	for _, nd := range c.nodes {
		eventually(t, 30*time.Second, nd.name+" VXLAN tunnel address", func() error {
			if c.tunnelAddr(nd.name) == "" {
				return fmt.Errorf("node %s has no spec.ipv4VXLANTunnelAddr", nd.name)
			}
			return nil
		})
	}
	p1, p2 := n1.pod("net", "nat-p1"), n2.pod("net", "nat-p2")
	listenPeer(t, p1.ns, hostPort(p1.ip, 8080))
	listenPeer(t, p2.ns, hostPort(p2.ip, 8080))
	outside := hostPort(outIP, 8080)

	sourceSeen(t, p1, outside, n1.ip, "pod on node1 -> outside, NATed to node1's address")
	sourceSeen(t, p2, outside, n2.ip, "pod on node2 -> outside, NATed to node2's address")

	before := c.vxlanPackets(n1, n2)
	sourceSeen(t, p1, hostPort(p2.ip, 8080), p1.ip, "pod on node1 -> pod on node2 over the tunnel, not NATed")
	sourceSeen(t, p2, hostPort(p1.ip, 8080), p2.ip, "pod on node2 -> pod on node1 over the tunnel, not NATed")
	if after := c.vxlanPackets(n1, n2); after == before {
		t.Errorf("the router saw no UDP 4789 from node1 to node2 while the pods talked: not through the tunnel")
	}

	updateOverlayPool(t, c, "vx", func(p *api.IPPool) { p.Spec.NATOutgoing = false })
	eventually(t, policyTimeout, "natOutgoing off: the outside cannot answer the pod", func() error {
		if got, err := dialPeer(p1.ns, outside); err == nil {
			return fmt.Errorf("the outside still answered, seeing %s", got)
		}
		return nil
	})
	sourceSeen(t, p1, hostPort(p2.ip, 8080), p1.ip, "natOutgoing off: pod to pod over the tunnel")
	updateOverlayPool(t, c, "vx", func(p *api.IPPool) { p.Spec.NATOutgoing = true })
	sourceSeen(t, p1, outside, n1.ip, "natOutgoing on again: NATed to node1's address")
}

// updateOverlayPool reads, changes and writes an IPPool.
func updateOverlayPool(t *testing.T, c *cluster, name string, change func(*api.IPPool)) {
	t.Helper()
	k, _ := api.LookupKind("IPPool")
	r, err := c.cl.GetResource(context.Background(), k, "", name)
	if err != nil {
		t.Fatal(err)
	}
	p := r.(*api.IPPool)
	change(p)
	if _, err := c.cl.UpdateResource(context.Background(), p); err != nil {
		t.Fatalf("updating pool %s: %v", name, err)
	}
}
