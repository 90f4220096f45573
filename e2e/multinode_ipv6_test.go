package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/ipam"
)

// Dual-stack BGP across nodes (MP-BGP): every node has an IPv4 and an IPv6
// address on the shared segment and runs IPv4 BGP sessions that carry both
// IPv4 and IPv6 unicast. Pods get an address from each pool; each node learns
// the other nodes' IPv6 blocks into its kernel (our BGP protocol) via the
// peer's IPv6 address; pods on different nodes reach each other over both
// families; releasing node3's blocks withdraws its IPv6 route everywhere.
func TestClusterIPv6CrossNode(t *testing.T) {
	t.Parallel()
	start := time.Now()
	const (
		subnet = "10.246.0"
		net6   = "fd00:246::"
		pool4  = "10.146.0.0/16"
		pool6  = "fd00:1246::/64"
		block6 = 122
	)
	c := newCluster(t, 3, subnet)
	mustNS(t, c.br, "ip", "-6", "addr", "add", net6+bridgeIP+"/64", "dev", "br0", "nodad")
	for _, nd := range c.nodes {
		mustNS(t, nd.ns, "ip", "-6", "addr", "add", nd.ip6()+"/64", "dev", "eth0", "nodad")
	}
	createPool(t, c.cl, "pool4", pool4, 26)
	createPool(t, c.cl, "pool6", pool6, block6)
	for _, nd := range c.nodes {
		nd.start("--ip6", nd.ip6()+"/64")
	}
	c.waitMesh(2)
	// The sessions are IPv4 only (one per node pair); IPv6 rides on them.
	c.nodes[0].peersAre(t, 5*time.Second, map[string]string{subnet + ".2": "node-to-node mesh", subnet + ".3": "node-to-node mesh"})

	pods := make([]pod, len(c.nodes))
	for i, nd := range c.nodes {
		pods[i] = nd.pod6("net6", "p6"+nd.name)
		if pods[i].ip == "" || pods[i].ip6 == "" {
			t.Fatalf("pod on %s: want an IPv4 and an IPv6 address, got %q and %q", nd.name, pods[i].ip, pods[i].ip6)
		}
		if !netip.MustParsePrefix(pool6).Contains(netip.MustParseAddr(pods[i].ip6)) {
			t.Fatalf("pod on %s: IPv6 %s not in %s", nd.name, pods[i].ip6, pool6)
		}
	}
	if r := mustNS(t, pods[0].ns, "ip", "-6", "route"); !strings.Contains(r, "default via fe80::ecee:eeff:feee:eeee dev eth0") {
		t.Fatalf("pod on node1: IPv6 routes:\n%s", r)
	}
	t.Logf("cluster up, pods %v/%v/%v (%s)", pods[0].ip6, pods[1].ip6, pods[2].ip6, time.Since(start).Round(time.Millisecond))

	// Every node learns every other node's IPv6 block via that node's IPv6
	// address (MP_REACH next hop), and its IPv4 block via its IPv4 address.
	for i, nd := range c.nodes {
		for j, other := range c.nodes {
			if i == j {
				continue
			}
			eventually(t, 15*time.Second, fmt.Sprintf("%s learns %s's IPv6 block", nd.name, other.name),
				nd.route6Via(blockOf(pods[j].ip6, block6), other.ip6()))
			eventually(t, 5*time.Second, fmt.Sprintf("%s learns %s's IPv4 block", nd.name, other.name),
				nd.routeVia(blockOf(pods[j].ip, 26), other.ip))
		}
	}
	t.Logf("node1 IPv6 BGP routes:\n%s", c.nodes[0].bgpRoutes6())

	// Pod to pod across nodes, both families.
	for i := range pods {
		for j := range pods {
			if i == j {
				continue
			}
			from, to := c.nodes[i].name, c.nodes[j].name
			eventually(t, 10*time.Second, "ping6 pod on "+from+" -> pod on "+to, reachable(pods[i].ns, pods[j].ip6))
			eventually(t, 10*time.Second, "ping pod on "+from+" -> pod on "+to, reachable(pods[i].ns, pods[j].ip))
		}
	}
	t.Logf("cross-node traffic ok (%s)", time.Since(start).Round(time.Millisecond))

	// Withdraw: the pod on node3 goes and node3's (now empty) blocks are
	// released; node3 stops advertising them and the others drop the routes.
	n1, n3 := c.nodes[0], c.nodes[2]
	b6, b4 := blockOf(pods[2].ip6, block6), blockOf(pods[2].ip, 26)
	n3.delPod6("net6", pods[2])
	if n, err := ipam.New(c.cl).ReleaseNodeAffinities(ctxBG, n3.name, true); err != nil || n < 2 {
		t.Fatalf("releasing node3's blocks: released %d, %v", n, err)
	}
	for _, nd := range c.nodes[:2] {
		eventually(t, 10*time.Second, nd.name+" drops node3's IPv6 block", nd.noRoute6(b6))
		eventually(t, 5*time.Second, nd.name+" drops node3's IPv4 block", nd.noRoute(b4))
	}
	// The rest is untouched: node1 still reaches node2's pod over IPv6.
	if err := n1.route6Via(blockOf(pods[1].ip6, block6), c.nodes[1].ip6())(); err != nil {
		t.Error(err)
	}
	eventually(t, 5*time.Second, "ping6 node1 pod -> node2 pod after the withdraw", reachable(pods[0].ns, pods[1].ip6))
	t.Logf("withdraw ok, total %s", time.Since(start).Round(time.Millisecond))
}

// ip6 is the node's IPv6 address on the shared segment (fd00:246::<index>).
func (nd *clusterNode) ip6() string { return fmt.Sprintf("fd00:246::%d", nd.index) }

// conflist6 is the node's CNI network config asking for an IPv4 and an IPv6
// address.
func (nd *clusterNode) conflist6(network string) *libcni.NetworkConfigList {
	nd.c.t.Helper()
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"calico","nodename":%q,"etcd_endpoints":%q,
"calico_lib_dir":%q,"calico_run_dir":%q,"ipam":{"type":"calico-ipam","assign_ipv4":"true","assign_ipv6":"true"}}]}`,
		network, nd.name, nd.c.etcd.Endpoints()[0], nd.state+"/lib", nd.state+"/run")
	l, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		nd.c.t.Fatal(err)
	}
	return l
}

// pod6 creates a dual-stack pod on the node through the CNI plugin.
func (nd *clusterNode) pod6(network, id string) pod {
	t := nd.c.t
	t.Helper()
	n := newNS(t)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: n.Path(), IfName: "eth0"}
	var r *current.Result
	err := nd.ns.Do(func(ns.NetNS) error {
		res, err := nd.cfg.AddNetworkList(context.Background(), nd.conflist6(network), rt)
		if err != nil {
			return err
		}
		r, err = current.NewResultFromResult(res)
		return err
	})
	if err != nil {
		t.Fatalf("ADD %s on %s: %v", id, nd.name, err)
	}
	v4, v6 := podAddrs(r)
	return pod{ns: n, ip: v4, ip6: v6, rt: rt}
}

func (nd *clusterNode) delPod6(network string, p pod) {
	t := nd.c.t
	t.Helper()
	if err := nd.ns.Do(func(ns.NetNS) error {
		return nd.cfg.DelNetworkList(context.Background(), nd.conflist6(network), p.rt)
	}); err != nil {
		t.Fatalf("DEL %s on %s: %v", p.rt.ContainerID, nd.name, err)
	}
}

// bgpRoutes6 lists the node's IPv6 kernel routes learned by BGP.
func (nd *clusterNode) bgpRoutes6() string {
	out, _ := inNS(nd.ns, "ip", "-6", "route", "show", "proto", "81")
	return out
}

// route6Via is nil when the node has an IPv6 BGP route for prefix via via.
func (nd *clusterNode) route6Via(prefix, via string) func() error {
	p := netip.MustParsePrefix(prefix)
	return func() error {
		out := nd.bgpRoutes6()
		if got, ok := parseRoutes(out)[p]; !ok || got != via {
			return fmt.Errorf("%s: want %s via %s, IPv6 BGP routes:\n%s", nd.name, p, via, out)
		}
		return nil
	}
}

// noRoute6 is nil when the node has no IPv6 BGP route for prefix.
func (nd *clusterNode) noRoute6(prefix string) func() error {
	p := netip.MustParsePrefix(prefix)
	return func() error {
		out := nd.bgpRoutes6()
		if _, ok := parseRoutes(out)[p]; ok {
			return fmt.Errorf("%s: still has an IPv6 BGP route for %s:\n%s", nd.name, p, out)
		}
		return nil
	}
}
