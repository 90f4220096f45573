package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/ipam"
	"github.com/calico-aio/calico-aio/store/api"
)

// Overlay benchmarks (issue #14): two nodes in two subnets behind a router
// that knows only the node subnets (newTwoSubnetCluster), BGP off
// (CALICO_NETWORKING_BACKEND=vxlan), pools with vxlanMode Always.

// benchRounds is OVERLAY_BENCH_ROUNDS, else def.
func benchRounds(b *testing.B, def int) int {
	if v := os.Getenv("OVERLAY_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("OVERLAY_BENCH_ROUNDS: %q is not a positive count", v)
		}
		return n
	}
	return def
}

// vxlanPair is node1 (10.251.1.1) and node2 (10.251.2.2) with their agents
// running, BGP off, and the VXLAN device up on both; the router joins them
// with point-to-point veths (bridge false) or bridges (bridge true, the
// e2e tests' newTwoSubnetCluster).
func vxlanPair(b *testing.B, bridge bool, pools func(c *cluster)) *cluster {
	b.Setenv("CALICO_NETWORKING_BACKEND", "vxlan")
	var c *cluster
	if bridge {
		c = newTwoSubnetCluster(b, 1, 2)
	} else {
		c = newRoutedPair(b)
	}
	pools(c)
	c.startAll()
	for _, nd := range c.nodes {
		eventually(b, 30*time.Second, nd.name+" VXLAN tunnel address and device", func() error {
			if c.tunnelAddr(nd.name) == "" {
				return fmt.Errorf("node %s has no spec.ipv4VXLANTunnelAddr", nd.name)
			}
			if out, _ := inNS(nd.ns, "ip", "-o", "link", "show", "vxlan.calico"); !strings.Contains(out, "vxlan.calico") {
				return fmt.Errorf("no vxlan.calico on %s", nd.name)
			}
			return nil
		})
	}
	return c
}

// BenchmarkOverlayVXLANThroughput: TCP throughput (iperf3, one stream)
// from a pod on node1 to a pod on node2 over VXLAN, and from node1 to
// node2 host to host over the same router, in interleaved rounds (the
// order alternates); medians and their ratio (target >= 0.85). The
// router's interfaces are point-to-point veths (router=veth, the target's
// figure) or, as in the e2e tests, bridges (router=bridge: the router then
// segments every VXLAN GSO packet in software, see newRoutedPair).
func BenchmarkOverlayVXLANThroughput(b *testing.B) {
	needIperf3(b)
	for _, bridge := range []bool{false, true} {
		name := map[bool]string{false: "router=veth", true: "router=bridge"}[bridge]
		b.Run(name, func(b *testing.B) { benchVXLANThroughput(b, bridge) })
	}
}

func benchVXLANThroughput(b *testing.B, bridge bool) {
	rounds, secs := benchRounds(b, 7), 4
	c := vxlanPair(b, bridge, func(c *cluster) { createVXLANPool(b, c, "vx", "10.131.0.0/16") })
	n1, n2 := c.nodes[0], c.nodes[1]
	p1, p2 := n1.pod("net", "bench-p1"), n2.pod("net", "bench-p2")
	eventually(b, 20*time.Second, "pod1 -> pod2 over VXLAN", reachable(p1.ns, p2.ip))
	iperfServer(b, n2.ns, n2.ip)
	iperfServer(b, p2.ns, p2.ip)
	c.observeVXLAN(4789)
	// What arrives at node2's eth0 during the pod runs: whole GSO packets
	// or MTU-sized ones.
	rx := func() (pkts, bytes int) {
		var links []struct {
			Stats struct {
				RX struct{ Bytes, Packets int }
			} `json:"stats64"`
		}
		if err := json.Unmarshal([]byte(mustNS(b, n2.ns, "ip", "-j", "-s", "link", "show", "eth0")), &links); err != nil || len(links) != 1 {
			b.Fatalf("node2's eth0 counters: %v", err)
		}
		return links[0].Stats.RX.Packets, links[0].Stats.RX.Bytes
	}
	var podPkts, podBytes int
	podRun := func() float64 {
		p0, b0 := rx()
		r := iperfRun(b, p1.ns, p2.ip, secs)
		p1, b1 := rx()
		podPkts, podBytes = podPkts+p1-p0, podBytes+b1-b0
		return r
	}
	var host, pod, ratio []float64
	for i := 0; i < rounds; i++ {
		var h, p float64
		if i%2 == 0 {
			h, p = iperfRun(b, n1.ns, n2.ip, secs), podRun()
		} else {
			p, h = podRun(), iperfRun(b, n1.ns, n2.ip, secs)
		}
		host, pod, ratio = append(host, h), append(pod, p), append(ratio, p/h)
		b.Logf("round %d: host-to-host %.2f Gbit/s, pod-to-pod over VXLAN %.2f Gbit/s (%.2fx)", i+1, h, p, p/h)
	}
	if n := c.vxlanPackets(n1, n2); n < 1000 {
		b.Fatalf("the router saw only %d UDP 4789 packets from node1 to node2: pod traffic was not encapsulated", n)
	}
	mtu := func(nsOut string) string {
		f := strings.Fields(nsOut)
		for i := range f {
			if f[i] == "mtu" && i+1 < len(f) {
				return f[i+1]
			}
		}
		return "?"
	}
	devOut, _ := inNS(n1.ns, "ip", "-o", "link", "show", "vxlan.calico")
	podOut, _ := inNS(p1.ns, "ip", "-o", "link", "show", "eth0")
	hm, pm := medianOf(host), medianOf(pod)
	b.Logf("%d interleaved rounds of %d s: host-to-host median %.2f Gbit/s, pod-to-pod over VXLAN median %.2f Gbit/s; ratio of medians %.2fx, median of per-round ratios %.2fx (target >= 0.85x); vxlan.calico MTU %s, pod MTU %s; node2's eth0 received %d bytes per packet during the pod runs",
		rounds, secs, hm, pm, pm/hm, medianOf(ratio), mtu(devOut), mtu(podOut), podBytes/max(podPkts, 1))
	b.ReportMetric(hm, "host-Gbit/s")
	b.ReportMetric(pm, "pod-vxlan-Gbit/s")
	b.ReportMetric(pm/hm, "ratio")
	b.ReportMetric(medianOf(ratio), "round-ratio")
}

// BenchmarkOverlayVXLANConvergence: with BGP off, the time from a new
// block claimed for node1 in etcd until node2 has its route via
// vxlan.calico (seen by a netlink subscription in node2's namespace), and
// from the block's release until the route is gone. The clock starts when
// the IPAM call that claims the block starts, so it includes IPAM's own
// etcd round trips (affinity claim, block create, allocation); their
// duration is reported too. Target p99 < 100 ms.
func BenchmarkOverlayVXLANConvergence(b *testing.B) {
	rounds := benchRounds(b, 100)
	c := vxlanPair(b, false, func(c *cluster) {
		// Tunnel addresses from one pool, the measured blocks from another,
		// so every round claims a block of its own.
		createVXLANPool(b, c, "tun", "10.132.0.0/16", api.IPPoolAllowedUseTunnel)
		createVXLANPool(b, c, "blk", "10.133.0.0/16", api.IPPoolAllowedUseWorkload)
	})
	n1, n2 := c.nodes[0], c.nodes[1]
	ev := subscribeRoutes(b, n2, "vxlan.calico")
	// node2 knows node1's VTEP once it routes node1's tunnel block.
	eventually(b, 20*time.Second, "node2 routes node1's tunnel block", func() error {
		a := c.tunnelAddr(n1.name)
		if out, _ := inNS(n2.ns, "ip", "route", "show", blockOf(a, 26)); !strings.Contains(out, "vxlan.calico") {
			return fmt.Errorf("node2's route to %s: %q", blockOf(a, 26), out)
		}
		return nil
	})
	al := ipam.New(c.cl)
	ctx := context.Background()
	var adds, dels, assign []time.Duration
	for i := 0; i < rounds; i++ {
		h := fmt.Sprintf("bench.conv%d", i)
		t0 := time.Now()
		got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: h, Node: n1.name, IPv4Pools: []string{"blk"}})
		if err != nil {
			b.Fatal(err)
		}
		assign = append(assign, time.Since(t0))
		block := got.IPv4[0].Masked()
		adds = append(adds, ev.wait(b, block, true).Sub(t0))
		if _, err := al.ReleaseByHandle(ctx, h); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := al.ReleaseNodeAffinities(ctx, n1.name, true); err != nil {
			b.Fatal(err)
		}
		dels = append(dels, ev.wait(b, block, false).Sub(t1))
		ev.forget(block)
	}
	p := func(d []time.Duration, q float64) float64 { return millis(quantile(d, q)) }
	b.Logf("%d rounds: new block for node1 -> route via vxlan.calico on node2 p50 %.1f ms p99 %.1f ms max %.1f ms (target p99 < 100 ms; of which the IPAM claim call p50 %.1f ms p99 %.1f ms); block released -> route gone p50 %.1f ms p99 %.1f ms",
		rounds, p(adds, 0.5), p(adds, 0.99), p(adds, 1), p(assign, 0.5), p(assign, 0.99), p(dels, 0.5), p(dels, 0.99))
	b.ReportMetric(p(adds, 0.5), "route-p50-ms")
	b.ReportMetric(p(adds, 0.99), "route-p99-ms")
	b.ReportMetric(p(assign, 0.99), "ipam-claim-p99-ms")
	b.ReportMetric(p(dels, 0.5), "withdraw-p50-ms")
	b.ReportMetric(p(dels, 0.99), "withdraw-p99-ms")
}
