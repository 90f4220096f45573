package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// With BGP running too, routes learned over BGP for blocks of a VXLAN pool
// do not replace the overlay's (Calico's BIRD rejects them for the
// kernel); once the pool stops encapsulating, BGP's routes take over.
func TestOverlayVXLANWithBGP(t *testing.T) {
	c := newCluster(t, 2, "10.252.0")
	createPool(t, c.cl, "vx", "10.131.0.0/16", 26)
	c.setVXLANMode("vx", api.VXLANModeAlways)
	c.startAll()
	c.waitMesh(1)
	n1 := c.nodes[0]
	p1, p2 := n1.pod("net", "pa"), c.nodes[1].pod("net", "pb")
	block := blockOf(p2.ip, 26)
	routeIs := func(want, not string) func() error {
		return func() error {
			out, _ := inNS(n1.ns, "ip", "route", "show", block)
			if !strings.Contains(out, want) || (not != "" && strings.Contains(out, not)) {
				return fmt.Errorf("node1's route to %s: %q, want %q", block, strings.TrimSpace(out), want)
			}
			return nil
		}
	}
	eventually(t, 20*time.Second, "VXLAN route with BGP on", routeIs("dev vxlan.calico proto 80 onlink", ""))
	eventually(t, 15*time.Second, "pod -> pod over VXLAN with BGP on", reachable(p1.ns, p2.ip))
	if r := n1.bgpRoutes(); strings.Contains(r, block) {
		t.Errorf("node1 programmed a BGP route inside the VXLAN pool:\n%s", r)
	}
	c.setVXLANMode("vx", api.VXLANModeNever)
	eventually(t, 20*time.Second, "BGP route once VXLAN is off", routeIs("via "+c.nodes[1].ip+" dev eth0 proto 81", "vxlan"))
	eventually(t, 15*time.Second, "pod -> pod over BGP", reachable(p1.ns, p2.ip))
}
