package e2e

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/storetest"
)

// Helpers for the overlay tests (overlay_*_test.go): nodes in two subnets,
// 10.251.1.0/24 and 10.251.2.0/24, each a bridge in a router namespace
// that routes between them and knows nothing else (no pod routes, no BGP).
// etcd listens on the router's first-subnet address.

const overlayNet = "10.251"

// newTwoSubnetCluster makes the router and one node per entry of subnets
// (1 or 2: the subnet node i+1 sits in); agents are not started.
func newTwoSubnetCluster(t testing.TB, subnets ...int) *cluster {
	t.Helper()
	needRoot(t)
	rt := newNS(t)
	c := &cluster{t: t, br: rt, bin: cniBinDir(t), subnet: overlayNet + ".1"}
	for _, s := range []int{1, 2} {
		br := fmt.Sprintf("br%d", s)
		mustNS(t, rt, "ip", "link", "add", br, "type", "bridge")
		mustNS(t, rt, "ip", "addr", "add", fmt.Sprintf("%s.%d.%s/24", overlayNet, s, bridgeIP), "dev", br)
		mustNS(t, rt, "ip", "link", "set", br, "up")
	}
	mustNS(t, rt, "ip", "link", "set", "lo", "up")
	mustNS(t, rt, "sysctl", "-qw", "net.ipv4.ip_forward=1") // it is a router
	c.etcd = storetest.StartEtcdIn(t, func(f func() error) error { return rt.Do(func(ns.NetNS) error { return f() }) },
		overlayNet+".1."+bridgeIP)
	c.cl = c.etcd.Client(t)
	for i, s := range subnets {
		c.addSubnetNode(i+1, s)
	}
	return c
}

// addSubnetNode wires node i into subnet s (address 10.251.s.i).
func (c *cluster) addSubnetNode(i, s int) *clusterNode {
	t := c.t
	t.Helper()
	nd := &clusterNode{c: c, name: fmt.Sprintf("node%d", i), index: i, ns: newNS(t),
		ip: fmt.Sprintf("%s.%d.%d", overlayNet, s, i), state: t.TempDir()}
	peer := fmt.Sprintf("n%d", i)
	mustNS(t, c.br, "ip", "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", nsName(nd.ns))
	mustNS(t, c.br, "ip", "link", "set", peer, "master", fmt.Sprintf("br%d", s), "up")
	mustNS(t, nd.ns, "ip", "addr", "add", nd.ip+"/24", "dev", "eth0")
	mustNS(t, nd.ns, "ip", "link", "set", "eth0", "up")
	mustNS(t, nd.ns, "ip", "route", "add", "default", "via", fmt.Sprintf("%s.%d.%s", overlayNet, s, bridgeIP), "dev", "eth0")
	freshHostForwarding(t, nd.ns)
	nd.cfg = libcni.NewCNIConfigWithCacheDir([]string{c.bin}, t.TempDir(), nil)
	c.nodes = append(c.nodes, nd)
	return nd
}

// setVXLANMode writes the pool's vxlanMode.
func (c *cluster) setVXLANMode(pool string, mode api.VXLANMode) {
	c.t.Helper()
	k, _ := api.LookupKind("IPPool")
	r, err := c.cl.GetResource(ctxBG, k, "", pool)
	if err != nil {
		c.t.Fatal(err)
	}
	p := r.(*api.IPPool)
	p.Spec.VXLANMode = mode
	if _, err := c.cl.UpdateResource(ctxBG, p); err != nil {
		c.t.Fatal(err)
	}
}

// tunnelAddr is the node's spec.ipv4VXLANTunnelAddr ("" when none or no node).
func (c *cluster) tunnelAddr(name string) string {
	k, _ := api.LookupKind("Node")
	r, err := c.cl.GetResource(ctxBG, k, "", name)
	if err != nil {
		return ""
	}
	return r.(*api.Node).Spec.IPv4VXLANTunnelAddr
}

// observeVXLAN installs nftables counters in the router for UDP to port
// between every ordered pair of nodes, on both paths a packet can take:
// bridged inside a subnet and routed between them.
func (c *cluster) observeVXLAN(port int) { c.observeUDP(v4Obs, port) }

// vxlanPackets is how many VXLAN packets the router has seen from a to b
// (bridged plus routed).
func (c *cluster) vxlanPackets(a, b *clusterNode) int { return c.udpPackets(v4Obs, a, b) }

// udpObs is one address family's router counters: the nft family and
// table, the node address, and the counter line as nft lists it.
type udpObs struct {
	fam, table string
	addr       func(*clusterNode) string
	counter    *regexp.Regexp
}

var (
	v4Obs = udpObs{"ip", "obs", func(nd *clusterNode) string { return nd.ip },
		regexp.MustCompile(`ip saddr (\S+) ip daddr (\S+) udp dport \d+ counter packets (\d+)`)}
	v6Obs = udpObs{"ip6", "obs6", ip6Of,
		regexp.MustCompile(`ip6 saddr (\S+) ip6 daddr (\S+) udp dport \d+ counter packets (\d+)`)}
)

func (c *cluster) observeUDP(o udpObs, port int) {
	t := c.t
	t.Helper()
	for _, fam := range []string{"bridge", o.fam} {
		mustNS(t, c.br, "nft", "add", "table", fam, o.table)
		mustNS(t, c.br, "nft", "add", "chain", fam, o.table, "pass", "{ type filter hook forward priority 0; }")
		for _, a := range c.nodes {
			for _, b := range c.nodes {
				if a != b {
					mustNS(t, c.br, "nft", "add", "rule", fam, o.table, "pass", o.fam, "saddr", o.addr(a), o.fam, "daddr", o.addr(b),
						"udp", "dport", strconv.Itoa(port), "counter")
				}
			}
		}
	}
}

func (c *cluster) udpPackets(o udpObs, a, b *clusterNode) int {
	c.t.Helper()
	n := 0
	for _, fam := range []string{"bridge", o.fam} {
		for _, m := range o.counter.FindAllStringSubmatch(mustNS(c.t, c.br, "nft", "list", "table", fam, o.table), -1) {
			if m[1] == o.addr(a) && m[2] == o.addr(b) {
				v, _ := strconv.Atoi(m[3])
				n += v
			}
		}
	}
	return n
}

// tcpEcho is nil when a TCP connection from n to addr echoes a byte.
func tcpEcho(n ns.NetNS, addr string) func() error {
	return func() error {
		return n.Do(func(ns.NetNS) error {
			conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := conn.Write([]byte("v")); err != nil {
				return err
			}
			buf := make([]byte, 1)
			if _, err := conn.Read(buf); err != nil || buf[0] != 'v' {
				return fmt.Errorf("echo from %s: %q %v", addr, buf, err)
			}
			return nil
		})
	}
}

// vxlanInputCounts reads the node's cali-INPUT packet counters of the
// VXLAN rules: accepted from known nodes, dropped from others.
func (nd *clusterNode) vxlanInputCounts() (accepted, dropped int) {
	return nd.vxlanInputCountsBy("iptables")
}

// vxlanInputCountsBy is vxlanInputCounts read with iptables or ip6tables.
func (nd *clusterNode) vxlanInputCountsBy(tool string) (accepted, dropped int) {
	t := nd.c.t
	t.Helper()
	for _, l := range strings.Split(mustNS(t, nd.ns, tool, "-t", "filter", "-L", "cali-INPUT", "-v", "-x", "-n"), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.Contains(l, "dpt:4789") {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch {
		case f[2] == "ACCEPT" && strings.Contains(l, "all-vxlan-net"):
			accepted += n
		case f[2] == "DROP":
			dropped += n
		}
	}
	return accepted, dropped
}

// sendUDP sends one datagram from namespace n to addr.
func sendUDP(t testing.TB, n ns.NetNS, addr string) {
	t.Helper()
	mustDo(t, n, func() error {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Write([]byte("not a calico node"))
		return err
	})
}

// ip6Of is the node's IPv6 address in the two-subnet cluster:
// fd51:<subnet>::<index>.
func ip6Of(nd *clusterNode) string {
	f := strings.Split(nd.ip, ".")
	return fmt.Sprintf("fd51:%s::%d", f[2], nd.index)
}

// addIPv6 gives the router and every node an IPv6 address in their
// subnet (fd51:<subnet>::/64) and the nodes a default IPv6 route via the
// router.
func (c *cluster) addIPv6() {
	t := c.t
	t.Helper()
	for _, s := range []int{1, 2} {
		mustNS(t, c.br, "ip", "-6", "addr", "add", fmt.Sprintf("fd51:%d::%s/64", s, bridgeIP), "dev", fmt.Sprintf("br%d", s), "nodad")
	}
	mustNS(t, c.br, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1") // it is a router
	for _, nd := range c.nodes {
		sub := strings.Split(nd.ip, ".")[2]
		mustNS(t, nd.ns, "ip", "-6", "addr", "add", ip6Of(nd)+"/64", "dev", "eth0", "nodad")
		mustNS(t, nd.ns, "ip", "-6", "route", "add", "default", "via", "fd51:"+sub+"::"+bridgeIP, "dev", "eth0")
	}
}

// observeVXLAN6 is observeVXLAN for VXLAN over IPv6 between the nodes'
// IPv6 addresses.
func (c *cluster) observeVXLAN6(port int) { c.observeUDP(v6Obs, port) }

// vxlanPackets6 is how many VXLAN-over-IPv6 packets the router has seen
// from a to b.
func (c *cluster) vxlanPackets6(a, b *clusterNode) int { return c.udpPackets(v6Obs, a, b) }

// tunnelAddr6 is the node's spec.ipv6VXLANTunnelAddr.
func (c *cluster) tunnelAddr6(name string) string {
	k, _ := api.LookupKind("Node")
	r, err := c.cl.GetResource(ctxBG, k, "", name)
	if err != nil {
		return ""
	}
	return r.(*api.Node).Spec.IPv6VXLANTunnelAddr
}

// nodePair is an ordered pair of nodes (traffic from a to b).
type nodePair struct{ a, b *clusterNode }

// vxlanPairs are the ordered node pairs of a three-node two-subnet cluster
// (nodes 1 and 2 share a subnet, node 3 is in the other) and a counter of
// the VXLAN packets the router saw from a to b.
type vxlanPairs struct {
	same, cross []nodePair
	packets     func(a, b *clusterNode) int
}

func newVXLANPairs(c *cluster, packets func(a, b *clusterNode) int) vxlanPairs {
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	return vxlanPairs{
		same:    []nodePair{{n1, n2}, {n2, n1}},
		cross:   []nodePair{{n1, n3}, {n3, n1}, {n2, n3}, {n3, n2}},
		packets: packets,
	}
}

// counts is every pair's packet count now.
func (v vxlanPairs) counts() map[nodePair]int {
	m := map[nodePair]int{}
	for _, p := range append(append([]nodePair{}, v.same...), v.cross...) {
		m[p] = v.packets(p.a, p.b)
	}
	return m
}

// expect checks the counts taken around step's traffic: the tunnelled
// pairs carried VXLAN packets, the direct ones none.
func (v vxlanPairs) expect(t *testing.T, step string, before, after map[nodePair]int, tunnelled, direct []nodePair) {
	t.Helper()
	for _, p := range direct {
		if d := after[p] - before[p]; d != 0 {
			t.Errorf("%s: %d VXLAN packets from %s to %s, want none (direct)", step, d, p.a.name, p.b.name)
		}
	}
	for _, p := range tunnelled {
		if after[p] == before[p] {
			t.Errorf("%s: no VXLAN packets from %s to %s", step, p.a.name, p.b.name)
		}
	}
}

// blockRouteIs is a check that on's route to block (IPv4 or IPv6) contains
// want.
func blockRouteIs(on *clusterNode, block, want string) func() error {
	return func() error {
		args := []string{"route", "show", block}
		if strings.Contains(block, ":") {
			args = append([]string{"-6"}, args...)
		}
		out, _ := inNS(on.ns, "ip", args...)
		if got := strings.TrimSpace(out); !strings.Contains(got, want) {
			return fmt.Errorf("%s: route to %s is %q, want %q", on.name, block, got, want)
		}
		return nil
	}
}
