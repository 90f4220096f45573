package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// editFelixDefault applies FelixConfiguration default after change (which
// sees the current object, or an empty one).
func (c *cluster) editFelixDefault(change func(*api.FelixConfiguration)) {
	c.t.Helper()
	k, _ := api.LookupKind("FelixConfiguration")
	f := k.NewObject().(*api.FelixConfiguration)
	if r, err := c.cl.GetResource(ctxBG, k, "", "default"); err == nil {
		f = r.(*api.FelixConfiguration)
	}
	f.Metadata.Name = "default"
	change(f)
	if _, err := c.cl.ApplyResource(ctxBG, f); err != nil {
		c.t.Fatal(err)
	}
}

// noBlockRoute is a check that on has no route to block.
func noBlockRoute(on *clusterNode, block string) func() error {
	return func() error {
		if out, _ := inNS(on.ns, "ip", "route", "show", block); strings.TrimSpace(out) != "" {
			return fmt.Errorf("%s: route to %s is %q, want none", on.name, block, strings.TrimSpace(out))
		}
		return nil
	}
}

// programClusterRoutes, as Calico v3.32 has it, on a pool with vxlanMode
// and ipipMode Never:
//   - BGP off, two subnets: FelixConfiguration programClusterRoutes
//     Enabled (live) makes each agent route the other nodes' blocks from
//     the datastore, "via <node> dev eth0 proto 80 onlink" (also to the
//     node in the other subnet), and the pods of the same-subnet nodes
//     reach each other; Disabled again, the routes go and so does the path;
//   - BGP on: the learned route (proto 81) is replaced by the agent's
//     (proto 80) when Felix's setting is Enabled; BGPConfiguration
//     programClusterRoutes Disabled leaves the agent's; with Felix's
//     Disabled too nothing routes the block (as in Calico); BGP's Enabled
//     brings the learned route back.
func TestProgramClusterRoutes(t *testing.T) {
	t.Parallel()
	t.Run("bgp off", func(t *testing.T) {
		t.Parallel()
		c := newTwoSubnetCluster(t, 1, 1, 2)
		createPool(t, c.cl, "flat", "10.149.0.0/16", 26)
		for _, nd := range c.nodes {
			nd.start("--bgp=false")
		}
		n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
		p1, p2, p3 := n1.pod("net", "pa"), n2.pod("net", "pb"), n3.pod("net", "pc")
		b1, b2, b3 := blockOf(p1.ip, 26), blockOf(p2.ip, 26), blockOf(p3.ip, 26)
		eventually(t, 10*time.Second, "Disabled (default): no route node1 -> node2", noBlockRoute(n1, b2))
		eventually(t, 5*time.Second, "Disabled (default): pod -> pod fails", unreachable(p1.ns, p2.ip))

		c.editFelixDefault(func(f *api.FelixConfiguration) { f.Spec.ProgramClusterRoutes = "Enabled" })
		eventually(t, 20*time.Second, "Enabled: node1 -> node2", blockRouteIs(n1, b2, "via "+n2.ip+" dev eth0 proto 80 onlink"))
		eventually(t, 20*time.Second, "Enabled: node2 -> node1", blockRouteIs(n2, b1, "via "+n1.ip+" dev eth0 proto 80 onlink"))
		eventually(t, 20*time.Second, "Enabled: node1 -> node3 (other subnet)", blockRouteIs(n1, b3, "via "+n3.ip+" dev eth0 proto 80 onlink"))
		eventually(t, 15*time.Second, "Enabled: pod on node1 -> pod on node2", reachable(p1.ns, p2.ip))
		eventually(t, 15*time.Second, "Enabled: pod on node2 -> pod on node1", reachable(p2.ns, p1.ip))
		if r := n1.bgpRoutes(); r != "" {
			t.Errorf("node1 has BGP routes with BGP off:\n%s", r)
		}

		c.editFelixDefault(func(f *api.FelixConfiguration) { f.Spec.ProgramClusterRoutes = "Disabled" })
		eventually(t, 20*time.Second, "Disabled again: no route node1 -> node2", noBlockRoute(n1, b2))
		eventually(t, 20*time.Second, "Disabled again: no route node1 -> node3", noBlockRoute(n1, b3))
		eventually(t, 5*time.Second, "Disabled again: pod -> pod fails", unreachable(p1.ns, p2.ip))
	})
	t.Run("bgp on", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, 2, "10.241.0")
		createPool(t, c.cl, "flat", "10.148.0.0/16", 26)
		c.startAll()
		c.waitMesh(1)
		n1, n2 := c.nodes[0], c.nodes[1]
		p1, p2 := n1.pod("net", "pa"), n2.pod("net", "pb")
		b2 := blockOf(p2.ip, 26)
		learned := "via " + n2.ip + " dev eth0 proto 81"
		own := "via " + n2.ip + " dev eth0 proto 80 onlink"
		eventually(t, 20*time.Second, "defaults: the learned route", blockRouteIs(n1, b2, learned))
		eventually(t, 15*time.Second, "defaults: pod -> pod", reachable(p1.ns, p2.ip))

		c.editFelixDefault(func(f *api.FelixConfiguration) { f.Spec.ProgramClusterRoutes = "Enabled" })
		eventually(t, 20*time.Second, "felix Enabled: the agent's route", blockRouteIs(n1, b2, own))
		eventually(t, 15*time.Second, "felix Enabled: pod -> pod", reachable(p1.ns, p2.ip))

		c.editBGPDefault(func(b *api.BGPConfiguration) { b.Spec.ProgramClusterRoutes = "Disabled" })
		eventually(t, 15*time.Second, "both handed to Felix: pod -> pod", reachable(p1.ns, p2.ip))
		if err := blockRouteIs(n1, b2, own)(); err != nil {
			t.Error(err)
		}

		c.editFelixDefault(func(f *api.FelixConfiguration) { f.Spec.ProgramClusterRoutes = "Disabled" })
		eventually(t, 20*time.Second, "neither programs: no route", noBlockRoute(n1, b2))
		eventually(t, 5*time.Second, "neither programs: pod -> pod fails", unreachable(p1.ns, p2.ip))

		c.editBGPDefault(func(b *api.BGPConfiguration) { b.Spec.ProgramClusterRoutes = "Enabled" })
		eventually(t, 20*time.Second, "bgp Enabled: the learned route again", blockRouteIs(n1, b2, learned))
		eventually(t, 15*time.Second, "bgp Enabled: pod -> pod", reachable(p1.ns, p2.ip))
	})
}
