package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
)

// Three nodes, node1 and node2 in 10.251.1.0/24, node3 in 10.251.2.0/24,
// joined by a router that knows only those subnets; BGP is off
// (CALICO_NETWORKING_BACKEND=vxlan), so only VXLAN carries pod traffic
// across nodes, with routes computed from IPAM blocks and Nodes.
//   - vxlanMode Always: every pair of pods reaches each other (ping, TCP)
//     and the router sees UDP 4789 between every pair of nodes; VXLAN from
//     an address that is no node's is dropped;
//   - CrossSubnet, switched live: the same-subnet pair goes direct (no UDP
//     4789 at all), the cross-subnet pairs through the tunnel;
//   - back to Always: the same-subnet pair is encapsulated again; an agent
//     restart keeps a tunnelled flow up; a policy denies across the tunnel;
//   - a deleted node: the others drop its routes, neighbour and FDB entry;
//   - Never: tunnel addresses released and the device removed.
func TestOverlayVXLANTwoSubnets(t *testing.T) {
	t.Setenv("CALICO_NETWORKING_BACKEND", "vxlan")
	c := newTwoSubnetCluster(t, 1, 1, 2)
	createPool(t, c.cl, "vx", "10.130.0.0/16", 26)
	c.setVXLANMode("vx", api.VXLANModeAlways)
	c.observeVXLAN(4789)
	c.startAll()
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	for _, nd := range c.nodes {
		eventually(t, 30*time.Second, nd.name+" VXLAN tunnel address", func() error {
			if c.tunnelAddr(nd.name) == "" {
				return fmt.Errorf("node %s has no spec.ipv4VXLANTunnelAddr", nd.name)
			}
			return nil
		})
	}
	pods := make([]pod, len(c.nodes))
	for i, nd := range c.nodes {
		pods[i] = nd.pod("net", "p"+nd.name)
		echoServer(t, pods[i].ns, pods[i].ip+":7000")
	}
	checkAll := func(step string) {
		t.Helper()
		for i := range pods {
			for j := range pods {
				if i == j {
					continue
				}
				what := fmt.Sprintf("%s: pod on %s -> pod on %s", step, c.nodes[i].name, c.nodes[j].name)
				eventually(t, 20*time.Second, what+" (ping)", reachable(pods[i].ns, pods[j].ip))
				eventually(t, 10*time.Second, what+" (TCP)", tcpEcho(pods[i].ns, pods[j].ip+":7000"))
			}
		}
	}
	routeIs := func(on *clusterNode, p pod, want string) func() error {
		return blockRouteIs(on, blockOf(p.ip, 26), want)
	}
	pairs := newVXLANPairs(c, c.vxlanPackets)
	counts := pairs.counts

	// Always.
	checkAll("Always")
	for _, nd := range c.nodes {
		if r := nd.bgpRoutes(); r != "" {
			t.Errorf("%s has BGP routes with BGP off:\n%s", nd.name, r)
		}
	}
	for p, n := range counts() {
		if n == 0 {
			t.Errorf("Always: the router saw no UDP 4789 from %s to %s", p.a.name, p.b.name)
		}
	}
	// VXLAN is accepted from Calico nodes only: the router's own address
	// is not one.
	acc, drop := n1.vxlanInputCounts()
	if acc == 0 {
		t.Errorf("node1 accepted no VXLAN packets from known nodes (drop counter %d)", drop)
	}
	sendUDP(t, c.br, n1.ip+":4789")
	eventually(t, 5*time.Second, "VXLAN from a non-node dropped", func() error {
		if _, d := n1.vxlanInputCounts(); d <= drop {
			return fmt.Errorf("node1's drop counter stayed at %d", d)
		}
		return nil
	})
	tun3 := c.tunnelAddr("node3")
	eventually(t, 5*time.Second, "node1's route to node3's block", routeIs(n1, pods[2], "via "+tun3+" dev vxlan.calico proto 80 onlink"))

	// CrossSubnet, live: same subnet direct, across subnets tunnelled.
	c.setVXLANMode("vx", api.VXLANModeCrossSubnet)
	eventually(t, 20*time.Second, "CrossSubnet: node1 -> node2 direct", routeIs(n1, pods[1], "via "+n2.ip+" dev eth0"))
	eventually(t, 20*time.Second, "CrossSubnet: node2 -> node1 direct", routeIs(n2, pods[0], "via "+n1.ip+" dev eth0"))
	eventually(t, 5*time.Second, "CrossSubnet: node1 -> node3 tunnelled", routeIs(n1, pods[2], "dev vxlan.calico"))
	before := counts()
	checkAll("CrossSubnet")
	pairs.expect(t, "CrossSubnet", before, counts(), pairs.cross, pairs.same)

	// Back to Always: the same-subnet pair is encapsulated again.
	c.setVXLANMode("vx", api.VXLANModeAlways)
	eventually(t, 20*time.Second, "Always again: node1 -> node2 tunnelled", routeIs(n1, pods[1], "dev vxlan.calico"))
	eventually(t, 20*time.Second, "Always again: node2 -> node1 tunnelled", routeIs(n2, pods[0], "dev vxlan.calico"))
	before = counts()
	checkAll("Always again")
	pairs.expect(t, "Always again", before, counts(), pairs.same, nil)

	// An agent restart keeps a flow through the tunnel up.
	pg := startPinger(t, pods[0].ns, pods[2].ip+":7000", 50*time.Millisecond, 2*time.Second)
	<-pg.first
	n1.agent.stop()
	n1.start()
	eventually(t, 10*time.Second, "node1 resynced after its restart", routeIs(n1, pods[2], "dev vxlan.calico"))
	if err := pg.stop(); err != nil {
		t.Errorf("a TCP flow node1 -> node3 broke while node1's agent restarted: %v", err)
	}

	// A policy denies across the tunnel as it does without one.
	k, _ := api.LookupKind("GlobalNetworkPolicy")
	gnp := k.NewObject().(*api.GlobalNetworkPolicy)
	gnp.Metadata.Name = "deny-node3-pods"
	order := 1.0
	gnp.Spec.Order, gnp.Spec.Selector, gnp.Spec.Types = &order, "all()", []api.PolicyType{api.PolicyTypeIngress}
	gnp.Spec.Ingress = []api.Rule{{Action: api.ActionDeny}}
	if _, err := c.cl.CreateResource(ctxBG, gnp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "deny across the tunnel", unreachable(pods[0].ns, pods[2].ip))
	if _, err := c.cl.DeleteResource(ctxBG, k, "", gnp.Metadata.Name, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "allowed again across the tunnel", reachable(pods[0].ns, pods[2].ip))

	// node3 goes: the others drop its route, neighbour and FDB entry.
	n3.agent.stop()
	if out, err := n1.ctl("delete", "node", "node3"); err != nil {
		t.Fatalf("calicoctl delete node node3: %v\n%s", err, out)
	}
	for _, nd := range []*clusterNode{n1, n2} {
		eventually(t, 20*time.Second, nd.name+" forgets node3", func() error {
			if r, _ := inNS(nd.ns, "ip", "route", "show", blockOf(pods[2].ip, 26)); strings.TrimSpace(r) != "" {
				return fmt.Errorf("route to node3's block: %s", r)
			}
			for _, cmd := range [][]string{{"ip", "neigh", "show", "dev", "vxlan.calico"}, {"bridge", "fdb", "show", "dev", "vxlan.calico"}} {
				out, err := inNS(nd.ns, cmd[0], cmd[1:]...)
				if err != nil || strings.Contains(out, tun3+" ") || strings.Contains(out, n3.ip+" ") {
					return fmt.Errorf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
				}
			}
			return nil
		})
	}
	eventually(t, 10*time.Second, "node1 <-> node2 after node3 left", tcpEcho(pods[0].ns, pods[1].ip+":7000"))

	// Never: tunnel addresses released, device gone.
	c.setVXLANMode("vx", api.VXLANModeNever)
	for _, nd := range []*clusterNode{n1, n2} {
		eventually(t, 20*time.Second, nd.name+" without VXLAN", func() error {
			if a := c.tunnelAddr(nd.name); a != "" {
				return fmt.Errorf("still has tunnel address %s", a)
			}
			if ips, err := ipam.New(c.cl).IPsByHandle(ctxBG, "vxlan-tunnel-addr-"+nd.name); err != nil || len(ips) > 0 {
				return fmt.Errorf("IPAM handle still holds %v (%v)", ips, err)
			}
			if out, _ := inNS(nd.ns, "ip", "-o", "link", "show"); strings.Contains(out, "vxlan.calico") {
				return fmt.Errorf("vxlan.calico still present")
			}
			return nil
		})
	}
}
