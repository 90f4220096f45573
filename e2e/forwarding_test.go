package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// Two nodes start as fresh Linux hosts, with IP forwarding off. With
// FelixConfiguration ipForwarding Disabled calico-node leaves it off: the
// BGP routes are there both ways, yet the receiving node drops what comes
// in on its uplink. With it Enabled (Calico's default) calico-node turns
// IPv4 forwarding on and the pods reach each other; IPv6 forwarding stays
// as it was, the nodes having no IPv6.
func TestClusterTurnsOnIPForwarding(t *testing.T) {
	c := newCluster(t, 2, "10.245.0")
	for _, nd := range c.nodes {
		if got := forwardingOf(t, nd.ns); got != "0 0" {
			t.Fatalf("%s starts with forwarding (ipv4 ipv6) %q, want a fresh host's 0 0", nd.name, got)
		}
	}
	createPool(t, c.cl, "pool", "10.147.0.0/16", 26)
	k, _ := api.LookupKind("FelixConfiguration")
	fc := k.NewObject().(*api.FelixConfiguration)
	fc.Metadata.Name = "default"
	fc.Spec.IPForwarding = "Disabled"
	created, err := c.cl.CreateResource(ctxBG, fc)
	if err != nil {
		t.Fatal(err)
	}
	c.startAll()
	c.waitMesh(1)
	p1, p2 := c.nodes[0].pod("net", "p1"), c.nodes[1].pod("net", "p2")
	eventually(t, 15*time.Second, "node1's route to node2's pods", c.nodes[0].routeVia(blockOf(p2.ip, 26), c.nodes[1].ip))
	eventually(t, 15*time.Second, "node2's route to node1's pods", c.nodes[1].routeVia(blockOf(p1.ip, 26), c.nodes[0].ip))
	for _, nd := range c.nodes {
		if got := forwardingOf(t, nd.ns); got != "0 0" {
			t.Errorf("%s: forwarding %q with ipForwarding Disabled, want it left at 0 0", nd.name, got)
		}
	}
	if err := ping(p1.ns, p2.ip); err == nil {
		t.Fatal("pods on different nodes reach each other with forwarding off: the test proves nothing")
	}

	fc = created.(*api.FelixConfiguration)
	fc.Spec.IPForwarding = "Enabled"
	if _, err := c.cl.UpdateResource(ctxBG, fc); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		eventually(t, 15*time.Second, nd.name+" forwarding on", func() error {
			if got := forwardingOf(t, nd.ns); got != "1 0" {
				return fmt.Errorf("forwarding (ipv4 ipv6) is %q, want 1 0 (IPv4 on; no IPv6 here)", got)
			}
			return nil
		})
	}
	eventually(t, 15*time.Second, "pod on node1 -> pod on node2", reachable(p1.ns, p2.ip))
	eventually(t, 15*time.Second, "pod on node2 -> pod on node1", reachable(p2.ns, p1.ip))
}
