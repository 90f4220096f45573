package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// Three nodes in a BGP full mesh: pods on different nodes reach each
// other, each node learns the others' blocks, a policy denies across
// nodes, and node status shows the mesh.
func TestClusterCrossNodeTraffic(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "10.250.0")
	createPool(t, c.cl, "pool", "10.120.0.0/16", 26)
	c.startAll()
	c.waitMesh(2)
	pods := make([]pod, 3)
	for i, nd := range c.nodes {
		pods[i] = nd.pod("net", "p"+nd.name)
	}
	for i := range pods {
		for j := range pods {
			if i != j {
				eventually(t, 15*time.Second, "pod on "+c.nodes[i].name+" -> pod on "+c.nodes[j].name, reachable(pods[i].ns, pods[j].ip))
			}
		}
	}
	if r := c.nodes[0].bgpRoutes(); !strings.Contains(r, "via 10.250.0.2") || !strings.Contains(r, "via 10.250.0.3") {
		t.Errorf("node1 BGP routes:\n%s", r)
	}
	out, err := c.nodes[0].nodeStatus()
	if err != nil || !strings.Contains(out, "Calico process is running.") || !strings.Contains(out, "node-to-node mesh") {
		t.Errorf("node status: %v\n%s", err, out)
	}
	t.Logf("calicoctl node status on node1:\n%s", out)

	// A policy denies traffic to pods on node3 from anywhere.
	k, _ := api.LookupKind("GlobalNetworkPolicy")
	p := k.NewObject().(*api.GlobalNetworkPolicy)
	p.Metadata.Name = "deny-all-ingress"
	order := 1.0
	p.Spec.Order, p.Spec.Selector = &order, "all()"
	p.Spec.Ingress = []api.Rule{{Action: api.ActionDeny}}
	p.Spec.Types = []api.PolicyType{api.PolicyTypeIngress}
	if _, err := c.cl.CreateResource(ctxBG, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "cross-node deny", unreachable(pods[0].ns, pods[2].ip))
	if _, err := c.cl.DeleteResource(ctxBG, k, "", "deny-all-ingress", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "deny removed", reachable(pods[0].ns, pods[2].ip))
}
