package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/internal/rtproto"
	"github.com/calico-aio/calico-aio/ipam"
)

// hasBGPRoute reports whether a node's kernel has a BGP route for p.
func (nd *clusterNode) hasBGPRoute(p netip.Prefix) bool {
	found := false
	_ = nd.ns.Do(func(ns.NetNS) error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: rtproto.BGP}, netlink.RT_FILTER_PROTOCOL)
		for _, r := range routes {
			if r.Dst != nil && r.Dst.String() == p.String() {
				found = true
			}
		}
		return err
	})
	return found
}

// waitAll polls every other node until cond holds on all of them.
func waitAll(b *testing.B, nodes []*clusterNode, cond func(*clusterNode) bool) time.Duration {
	t0 := time.Now()
	for {
		ok := true
		for _, nd := range nodes {
			if !cond(nd) {
				ok = false
				break
			}
		}
		if ok {
			return time.Since(t0)
		}
		if time.Since(t0) > 30*time.Second {
			b.Fatalf("not converged after 30s")
		}
		time.Sleep(time.Millisecond)
	}
}

// procMB reads a "Field:  N kB" line of /proc/<pid>/<file> as MB (0 when
// missing).
func procMB(pid int, file, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, field) {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return 0
}

// ussMB is a process's unique set size: the pages only it maps (its heap
// and stacks, and binary pages no other process maps), what freeing the
// process gives back. RSS also counts the pages of the static binary that
// every process of the same binary shares and the page cache keeps anyway.
func ussMB(pid int) float64 {
	return procMB(pid, "smaps_rollup", "Private_Clean:") + procMB(pid, "smaps_rollup", "Private_Dirty:")
}

// pssMB is a process's proportional set size: its private pages plus its
// share of the pages it maps together with other processes.
func pssMB(pid int) float64 { return procMB(pid, "smaps_rollup", "Pss:") }

// rssMB is a process's resident memory.
func rssMB(pid int) float64 { return procMB(pid, "status", "VmRSS:") }

func procStat(pid int) (cpu time.Duration, rss float64) {
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+2:])
		ut, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		cpu = time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
	}
	return cpu, rssMB(pid)
}

// BenchmarkClusterBGP: on full-mesh clusters of 10 and 20 nodes (or the
// sizes in CLUSTER_BENCH_NODES, comma-separated), the time from a new block
// on one node to its route on every other node, the time for its withdraw
// to remove them, and each agent's CPU and memory at rest.
func BenchmarkClusterBGP(b *testing.B) {
	sizes := []int{10, 20}
	if v := os.Getenv("CLUSTER_BENCH_NODES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("CLUSTER_BENCH_NODES: %q is not a node count of 2 or more", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchClusterBGP(b, n) })
	}
}

func benchClusterBGP(b *testing.B, n int) {
	c := newCluster(b, n, "10.249.0")
	createPool(b, c.cl, "bench", "10.140.0.0/16", 26)
	c.startAll()
	c.waitMesh(n - 1)
	al := ipam.New(c.cl)
	ctx := context.Background()
	var adds, dels []time.Duration
	for i := 0; i < 20; i++ {
		src := c.nodes[i%n]
		others := slices.DeleteFunc(slices.Clone(c.nodes), func(x *clusterNode) bool { return x == src })
		got, err := al.AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: fmt.Sprintf("bench.%d", i), Node: src.name})
		if err != nil {
			b.Fatal(err)
		}
		block := got.IPv4[0].Masked()
		adds = append(adds, waitAll(b, others, func(nd *clusterNode) bool { return nd.hasBGPRoute(block) }))
		if _, err := al.ReleaseByHandle(ctx, fmt.Sprintf("bench.%d", i)); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := al.ReleaseNodeAffinities(ctx, src.name, true); err != nil {
			b.Fatal(err)
		}
		waitAll(b, others, func(nd *clusterNode) bool { return !nd.hasBGPRoute(block) })
		dels = append(dels, time.Since(t0))
	}
	// Resources at rest over 5 s.
	cpu0 := make([]time.Duration, n)
	for i, nd := range c.nodes {
		cpu0[i], _ = procStat(nd.agent.cmd.Process.Pid)
	}
	time.Sleep(5 * time.Second)
	var maxRSS, sumRSS, maxUSS, maxPSS float64
	var sumCPU time.Duration
	for i, nd := range c.nodes {
		cpu, rss := procStat(nd.agent.cmd.Process.Pid)
		sumCPU += cpu - cpu0[i]
		sumRSS += rss
		maxRSS = max(maxRSS, rss)
		maxUSS = max(maxUSS, ussMB(nd.agent.cmd.Process.Pid))
		maxPSS = max(maxPSS, pssMB(nd.agent.cmd.Process.Pid))
	}
	slices.Sort(adds)
	slices.Sort(dels)
	cpuPct := 100 * sumCPU.Seconds() / float64(n) / 5
	b.Logf("%d-node full mesh: new block -> route on all %d others p50 %.1f ms p99 %.1f ms; withdraw -> gone everywhere p50 %.1f ms p99 %.1f ms; agent USS max %.1f MB, PSS max %.1f MB (RSS avg %.1f MB max %.1f MB); idle CPU %.2f%% of a core per agent",
		n, n-1, millis(adds[len(adds)/2]), millis(adds[len(adds)*99/100]), millis(dels[len(dels)/2]), millis(dels[len(dels)*99/100]), maxUSS, maxPSS, sumRSS/float64(n), maxRSS, cpuPct)
	b.ReportMetric(millis(adds[len(adds)/2]), "propagate-p50-ms")
	b.ReportMetric(millis(adds[len(adds)*99/100]), "propagate-p99-ms")
	b.ReportMetric(millis(dels[len(dels)/2]), "withdraw-p50-ms")
	b.ReportMetric(millis(dels[len(dels)*99/100]), "withdraw-p99-ms")
	b.ReportMetric(maxRSS, "agent-max-rss-MB")
	b.ReportMetric(maxUSS, "agent-max-uss-MB")
	b.ReportMetric(maxPSS, "agent-max-pss-MB")
	b.ReportMetric(cpuPct, "agent-idle-cpu-%")
}
