package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// Two nodes in a mesh: pods on different nodes TCP-connect both ways over
// BGP-learned routes, and a policy that denies one TCP port across nodes
// blocks exactly that port (ping and another port still pass, so the
// routes are fine and the refusal is the policy's).
func TestClusterTCPAcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "10.251.0")
	createPool(t, c.cl, "pool", "10.121.0.0/16", 26)
	c.startAll()
	c.waitMesh(1)
	n1, n2 := c.nodes[0], c.nodes[1]
	p1, p2 := n1.pod("net", "tcp1"), n2.pod("net", "tcp2")
	eventually(t, 20*time.Second, "node1 learns node2's block", n1.routeVia(blockOf(p2.ip, 26), n2.ip))
	eventually(t, 20*time.Second, "node2 learns node1's block", n2.routeVia(blockOf(p1.ip, 26), n1.ip))

	for _, port := range []int{8080, 8081} {
		listenPeer(t, p1.ns, fmt.Sprintf("%s:%d", p1.ip, port))
		listenPeer(t, p2.ns, fmt.Sprintf("%s:%d", p2.ip, port))
	}
	eventually(t, 15*time.Second, "pod on node1 -> pod on node2, TCP", tcpProbe(p1.ns, p2.ip+":8080"))
	eventually(t, 15*time.Second, "pod on node2 -> pod on node1, TCP", tcpProbe(p2.ns, p1.ip+":8080"))

	// Deny TCP to port 8080 on every pod; allow everything else.
	k, _ := api.LookupKind("GlobalNetworkPolicy")
	p := k.NewObject().(*api.GlobalNetworkPolicy)
	p.Metadata.Name = "deny-8080"
	order := 1.0
	tcpProto := api.ProtocolFromString("TCP")
	p.Spec.Order, p.Spec.Selector = &order, "all()"
	p.Spec.Ingress = []api.Rule{
		{Action: api.ActionDeny, Protocol: &tcpProto, Destination: api.EntityRule{Ports: []api.Port{api.SinglePort(8080)}}},
		{Action: api.ActionAllow},
	}
	p.Spec.Types = []api.PolicyType{api.PolicyTypeIngress}
	if _, err := c.cl.CreateResource(ctxBG, p); err != nil {
		t.Fatal(err)
	}
	expectTrafficMN(t, "cross-node deny of port 8080",
		[]mnProbe{
			{"node1 pod -> node2 pod :8081", true, tcpProbe(p1.ns, p2.ip+":8081")},
			{"node2 pod -> node1 pod :8081", true, tcpProbe(p2.ns, p1.ip+":8081")},
			{"node1 pod -> node2 pod ping", true, reachable(p1.ns, p2.ip)},
			{"node1 pod -> node2 pod :8080", false, tcpProbe(p1.ns, p2.ip+":8080")},
			{"node2 pod -> node1 pod :8080", false, tcpProbe(p2.ns, p1.ip+":8080")},
		})
	if _, err := c.cl.DeleteResource(ctxBG, k, "", "deny-8080", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "port 8080 again after the policy is gone", tcpProbe(p1.ns, p2.ip+":8080"))
}

// mnProbe is one connection check and whether it should get through.
type mnProbe struct {
	name string
	want bool
	run  func() error
}

// expectTrafficMN waits until every probe gives its expected answer in the
// same round.
func expectTrafficMN(t testing.TB, what string, probes []mnProbe) {
	t.Helper()
	eventually(t, 20*time.Second, what, func() error {
		for _, p := range probes {
			err := p.run()
			switch {
			case p.want && err != nil:
				return fmt.Errorf("%s: want allowed: %w", p.name, err)
			case !p.want && err == nil:
				return fmt.Errorf("%s: want denied, got through", p.name)
			}
		}
		return nil
	})
}
