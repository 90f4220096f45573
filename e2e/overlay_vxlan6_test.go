package e2e

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// IPv6 VXLAN across the two subnets with BGP off: dual-stack pods on every
// pair of nodes reach each other over IPv6 (ping, TCP) through
// vxlan-v6.calico, the router sees VXLAN over IPv6 between every pair of
// nodes, VXLAN over IPv6 is accepted only from nodes; with CrossSubnet the
// same-subnet pair carries none.
func TestOverlayVXLANIPv6TwoSubnets(t *testing.T) {
	t.Setenv("CALICO_NETWORKING_BACKEND", "vxlan")
	c := newTwoSubnetCluster(t, 1, 1, 2)
	c.addIPv6()
	createPool(t, c.cl, "vx4", "10.132.0.0/16", 26)
	createPool(t, c.cl, "vx6", "fd00:132::/64", 122)
	c.setVXLANMode("vx4", api.VXLANModeAlways)
	c.setVXLANMode("vx6", api.VXLANModeAlways)
	c.observeVXLAN6(4789)
	for _, nd := range c.nodes {
		nd.start("--ip6", ip6Of(nd)+"/64")
	}
	n1, n2 := c.nodes[0], c.nodes[1]
	for _, nd := range c.nodes {
		eventually(t, 30*time.Second, nd.name+" IPv6 VXLAN tunnel address", func() error {
			if c.tunnelAddr6(nd.name) == "" {
				return fmt.Errorf("node %s has no spec.ipv6VXLANTunnelAddr", nd.name)
			}
			return nil
		})
	}
	pods := make([]pod, len(c.nodes))
	for i, nd := range c.nodes {
		pods[i] = nd.pod6("net6", "p6"+nd.name)
		if pods[i].ip6 == "" {
			t.Fatalf("pod on %s has no IPv6 address", nd.name)
		}
		echoServer(t, pods[i].ns, net.JoinHostPort(pods[i].ip6, "7000"))
	}
	checkAll := func(step string) {
		t.Helper()
		for i := range pods {
			for j := range pods {
				if i == j {
					continue
				}
				what := fmt.Sprintf("%s: pod on %s -> pod on %s over IPv6", step, c.nodes[i].name, c.nodes[j].name)
				eventually(t, 20*time.Second, what+" (ping)", reachable(pods[i].ns, pods[j].ip6))
				eventually(t, 10*time.Second, what+" (TCP)", tcpEcho(pods[i].ns, net.JoinHostPort(pods[j].ip6, "7000")))
			}
		}
	}
	routeIs := func(on *clusterNode, p pod, want string) func() error {
		return blockRouteIs(on, blockOf(p.ip6, 122), want)
	}
	pairs := newVXLANPairs(c, c.vxlanPackets6)
	counts := pairs.counts

	checkAll("Always")
	for p, n := range counts() {
		if n == 0 {
			t.Errorf("Always: the router saw no VXLAN over IPv6 from %s to %s", p.a.name, p.b.name)
		}
	}
	acc, drop := n1.vxlanInputCountsBy("ip6tables")
	if acc == 0 {
		t.Errorf("node1 accepted no VXLAN over IPv6 from known nodes (cali60all-vxlan-net)")
	}
	sendUDP(t, c.br, net.JoinHostPort(ip6Of(n1), "4789"))
	eventually(t, 5*time.Second, "VXLAN over IPv6 from a non-node dropped", func() error {
		if _, d := n1.vxlanInputCountsBy("ip6tables"); d <= drop {
			return fmt.Errorf("node1's IPv6 drop counter stayed at %d", d)
		}
		return nil
	})
	eventually(t, 5*time.Second, "node1's IPv6 route to node3's block",
		routeIs(n1, pods[2], "via "+c.tunnelAddr6("node3")+" dev vxlan-v6.calico proto 80"))

	c.setVXLANMode("vx6", api.VXLANModeCrossSubnet)
	eventually(t, 20*time.Second, "CrossSubnet: node1 -> node2 direct", routeIs(n1, pods[1], "via "+ip6Of(n2)+" dev eth0"))
	eventually(t, 20*time.Second, "CrossSubnet: node2 -> node1 direct", routeIs(n2, pods[0], "via "+ip6Of(n1)+" dev eth0"))
	eventually(t, 5*time.Second, "CrossSubnet: node1 -> node3 tunnelled", routeIs(n1, pods[2], "dev vxlan-v6.calico"))
	before := counts()
	checkAll("CrossSubnet")
	pairs.expect(t, "CrossSubnet", before, counts(), pairs.cross, pairs.same)
}
