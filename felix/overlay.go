package felix

import (
	"net/netip"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
)

// addOverlay adds the VXLAN device, its peers and the overlay routes to
// des (after local endpoint and blackhole routes, which win), then the
// routes learned over BGP, except those inside a pool VXLAN carries: as
// Calico's BIRD config rejects those for the kernel, the overlay's own
// routes are the ones programmed.
func addOverlay(des *dataplane.Desired, ov calc.OverlayDesired, learned map[netip.Prefix]dataplane.RouteTarget) {
	if dev := ov.Device; dev.Addr.IsValid() {
		des.VXLAN.Device = &dataplane.VXLANDevice{Name: calc.VXLANDevice, VNI: dev.VNI, Port: dev.Port, MTU: dev.MTU,
			Addr: dev.Addr, MAC: dev.MAC, Parent: dev.Parent}
		for _, v := range ov.VTEPs {
			des.VXLAN.Peers = append(des.VXLAN.Peers, dataplane.VXLANPeer{Addr: v.Addr, MAC: v.MAC, NodeIP: v.NodeIP})
		}
	}
	for p, r := range ov.Routes {
		if _, local := des.Routes[p]; local {
			continue
		}
		t := dataplane.RouteTarget{Via: []netip.Addr{r.Via}}
		if r.Tunnel {
			t.Iface, t.OnLink = calc.VXLANDevice, true
		}
		des.Routes[p] = t
	}
	for p, t := range learned {
		if _, have := des.Routes[p]; !have && !ov.Covers(p) {
			des.Routes[p] = t
		}
	}
}
