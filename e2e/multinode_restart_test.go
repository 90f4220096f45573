package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// node2's agent stops gracefully (SIGTERM) and starts again with the same
// state: a TCP connection between pods on node1 and node2, exchanging a
// byte every 200 ms, never breaks, and neither node loses its BGP route to
// the other's block at any time (sampled every 100 ms): node1 keeps node2's
// routes as a graceful restart helper and node2 keeps what it learned.
func TestClusterAgentRestartKeepsCrossNodeFlows(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "10.252.0")
	createPool(t, c.cl, "pool", "10.122.0.0/16", 26)
	c.startAll()
	c.waitMesh(1)
	n1, n2 := c.nodes[0], c.nodes[1]
	p1, p2 := n1.pod("net", "rs1"), n2.pod("net", "rs2")
	b1, b2 := blockOf(p1.ip, 26), blockOf(p2.ip, 26)
	eventually(t, 20*time.Second, "node1 learns node2's block", n1.routeVia(b2, n2.ip))
	eventually(t, 20*time.Second, "node2 learns node1's block", n2.routeVia(b1, n1.ip))

	echoServer(t, p2.ns, p2.ip+":7000")
	var conn *pinger
	eventually(t, 15*time.Second, "TCP from the pod on node1 to the pod on node2", func() error {
		conn = startPinger(t, p1.ns, p2.ip+":7000", 200*time.Millisecond, 2*time.Second)
		select {
		case <-conn.first:
			return nil
		case <-time.After(time.Second):
			return fmt.Errorf("no echo yet: %v", conn.stop())
		}
	})
	on1 := watchRoute(n1, b2, 100*time.Millisecond)
	on2 := watchRoute(n2, b1, 100*time.Millisecond)

	start := time.Now()
	n2.agent.stop()
	stopped := time.Since(start)
	time.Sleep(time.Second) // really down for a while
	n2.start()
	ready := time.Since(start)
	c.waitMesh(1)
	up := time.Since(start)
	// Past the restart: End-of-RIB both ways, stale routes swept, and one
	// resync interval (3 s) of the new agent.
	time.Sleep(4 * time.Second)
	on1.stop()
	on2.stop()
	err := conn.stop()
	rounds := conn.rounds
	if err != nil {
		t.Errorf("the TCP connection broke during the restart: %v", err)
	}
	t.Logf("restart: agent stopped in %s, ready again at %s, sessions up at %s; %d echo rounds; route samples node1 %d, node2 %d",
		stopped.Round(time.Millisecond), ready.Round(time.Millisecond), up.Round(time.Millisecond), rounds, on1.samples, on2.samples)
	for _, w := range []struct {
		who   string
		watch *routeWatch
	}{{"node1 lost its route to node2's block", on1}, {"node2 lost its route to node1's block", on2}} {
		if m := w.watch.missing; len(m) > 0 {
			t.Errorf("%s during the restart in %d of %d samples: first %s, last %s",
				w.who, len(m), w.watch.samples, m[0], m[len(m)-1])
		}
	}
	if err := n1.routeVia(b2, n2.ip)(); err != nil {
		t.Error(err)
	}
}

// node3 leaves: its agent dies without a word (SIGKILL, link down) and its
// Node resource is deleted. node1 and node2 remove it as a mesh peer and drop
// its routes at once (no hold-time wait), and keep reaching each other.
func TestClusterNodeLeaves(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "10.253.0")
	createPool(t, c.cl, "pool", "10.123.0.0/16", 26)
	c.startAll()
	c.waitMesh(2)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	p1, p2, p3 := n1.pod("net", "nl1"), n2.pod("net", "nl2"), n3.pod("net", "nl3")
	b3 := blockOf(p3.ip, 26)
	for _, nd := range []*clusterNode{n1, n2} {
		eventually(t, 20*time.Second, nd.name+" learns node3's block", nd.routeVia(b3, n3.ip))
	}
	eventually(t, 15*time.Second, "node1 pod -> node3 pod", reachable(p1.ns, p3.ip))

	n3.kill()
	mustNS(t, n3.ns, "ip", "link", "set", "eth0", "down")
	start := time.Now()
	k, _ := api.LookupKind("Node")
	if _, err := c.cl.DeleteResource(ctxBG, k, "", "node3", ""); err != nil {
		t.Fatal(err)
	}
	for _, nd := range []*clusterNode{n1, n2} {
		eventually(t, 10*time.Second, nd.name+" drops node3's block", nd.noRoute(b3))
		eventually(t, 10*time.Second, nd.name+" drops node3 as a peer", func() error {
			out, err := nd.nodeStatus()
			if err != nil || strings.Contains(out, n3.ip+" ") {
				return fmt.Errorf("%v\n%s", err, out)
			}
			return nil
		})
	}
	t.Logf("node3's routes gone from node1 and node2 %s after the Node was deleted", time.Since(start).Round(time.Millisecond))
	if out, _ := n1.nodeStatus(); !strings.Contains(out, n2.ip) {
		t.Errorf("node1 lost node2 as a peer:\n%s", out)
	}
	eventually(t, 10*time.Second, "node1 pod -> node2 pod", reachable(p1.ns, p2.ip))
	eventually(t, 10*time.Second, "node2 pod -> node1 pod", reachable(p2.ns, p1.ip))
	eventually(t, 10*time.Second, "node1 pod -/-> node3 pod", unreachable(p1.ns, p3.ip))
}
