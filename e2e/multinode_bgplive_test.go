package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// editBGPDefault applies BGPConfiguration default after change (which
// sees the current object, or an empty one).
func (c *cluster) editBGPDefault(change func(*api.BGPConfiguration)) {
	c.t.Helper()
	k, _ := api.LookupKind("BGPConfiguration")
	cfg := k.NewObject().(*api.BGPConfiguration)
	if r, err := c.cl.GetResource(ctxBG, k, "", "default"); err == nil {
		cfg = r.(*api.BGPConfiguration)
	}
	cfg.Metadata.Name = "default"
	change(cfg)
	if _, err := c.cl.ApplyResource(ctxBG, cfg); err != nil {
		c.t.Fatal(err)
	}
}

// The cluster AS number and then the BGP listen port change live
// (BGPConfiguration default): each agent replaces its speaker, without a
// restart (same PIDs), while the pods keep reaching each other: a TCP
// connection exchanging a byte every 200 ms never stalls for 5 s, both
// directions answer within 5 s of each change, and neither node loses its
// route to the other's block (sampled every 100 ms). The sessions come back
// with the new settings: a pod in a new block on node2 is reached from
// node1 after each change. Last, ipv4NormalRoutePriority changes the
// learned routes' metric live, without a gap.
func TestClusterBGPLiveASAndPort(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "10.238.0")
	createPool(t, c.cl, "pool", "10.138.0.0/16", 26)
	c.startAll()
	c.waitMesh(1)
	n1, n2 := c.nodes[0], c.nodes[1]
	p1, p2 := n1.pod("net", "lv1"), n2.pod("net", "lv2")
	b1, b2 := blockOf(p1.ip, 26), blockOf(p2.ip, 26)
	eventually(t, 20*time.Second, "node1 learns node2's block", n1.routeVia(b2, n2.ip))
	eventually(t, 20*time.Second, "node2 learns node1's block", n2.routeVia(b1, n1.ip))
	createPool(t, c.cl, "pool2", "10.139.0.0/16", 26) // for the new pods below

	echoServer(t, p2.ns, p2.ip+":7000")
	var conn *pinger
	eventually(t, 15*time.Second, "TCP from the pod on node1 to the pod on node2", func() error {
		conn = startPinger(t, p1.ns, p2.ip+":7000", 200*time.Millisecond, 5*time.Second)
		select {
		case <-conn.first:
			return nil
		case <-time.After(time.Second):
			return fmt.Errorf("no echo yet: %v", conn.stop())
		}
	})
	pids := []int{n1.agent.cmd.Process.Pid, n2.agent.cmd.Process.Pid}
	on1 := watchRoute(n1, b2, 100*time.Millisecond)
	on2 := watchRoute(n2, b1, 100*time.Millisecond)

	for i, ch := range []struct {
		what  string
		edit  func(*api.BGPConfiguration)
		podIP string
	}{
		{"asNumber 64600", func(cfg *api.BGPConfiguration) { asn := api.ASNumber(64600); cfg.Spec.ASNumber = &asn }, "10.139.0.10"},
		{"listenPort 1790", func(cfg *api.BGPConfiguration) { cfg.Spec.ListenPort = 1790 }, "10.139.1.10"},
	} {
		start := time.Now()
		c.editBGPDefault(ch.edit)
		eventually(t, 5*time.Second, "node1's pod reaches node2's after "+ch.what, reachable(p1.ns, p2.ip))
		eventually(t, 5*time.Second, "node2's pod reaches node1's after "+ch.what, reachable(p2.ns, p1.ip))
		reach := time.Since(start)
		p := n2.pod("net", fmt.Sprintf("lvnew%d", i), [2]string{"IP", ch.podIP})
		eventually(t, 30*time.Second, "a new pod on node2 reached from node1 after "+ch.what, reachable(p1.ns, p.ip))
		c.waitMesh(1)
		t.Logf("%s: pods reach each other at %s; new sessions carry routes at %s", ch.what,
			reach.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	// The learned routes' metric changes live too, in place: the route
	// watch above sees no gap.
	c.editBGPDefault(func(cfg *api.BGPConfiguration) { pr := int32(1500); cfg.Spec.IPv4NormalRoutePriority = &pr })
	eventually(t, 5*time.Second, "node1's route to node2's block with metric 1500", func() error {
		for _, l := range strings.Split(n1.bgpRoutes(), "\n") {
			if strings.HasPrefix(l, b2+" via "+n2.ip) && strings.Contains(l, " metric 1500") {
				return nil
			}
		}
		return fmt.Errorf("routes:\n%s", n1.bgpRoutes())
	})
	eventually(t, 5*time.Second, "node1's pod reaches node2's with the new metric", reachable(p1.ns, p2.ip))
	on1.stop()
	on2.stop()
	if err := conn.stop(); err != nil {
		t.Errorf("the TCP connection between the pods broke: %v", err)
	}
	for _, w := range []struct {
		who   string
		watch *routeWatch
	}{{"node1 lost its route to node2's block", on1}, {"node2 lost its route to node1's block", on2}} {
		if m := w.watch.missing; len(m) > 0 {
			t.Errorf("%s in %d of %d samples: first %s, last %s", w.who, len(m), w.watch.samples, m[0], m[len(m)-1])
		}
	}
	for i, nd := range []*clusterNode{n1, n2} {
		if nd.agent.cmd.ProcessState != nil || nd.agent.cmd.Process.Pid != pids[i] {
			t.Errorf("%s's agent restarted (pid %d, was %d)", nd.name, nd.agent.cmd.Process.Pid, pids[i])
		}
		if n := strings.Count(nd.agent.logs.String(), "replacing the speaker"); n != 2 {
			t.Errorf("%s replaced its speaker %d times, want 2 (AS, then port)", nd.name, n)
		}
	}
	out, _ := n1.nodeStatus()
	if !strings.Contains(out, "| up ") {
		t.Errorf("node1's session is not up at the end:\n%s", out)
	}
}
