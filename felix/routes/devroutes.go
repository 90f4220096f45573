package routes

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/calico-aio/calico-aio/felix/dataplane"
)

// DeviceConfig are the FelixConfiguration fields that shape the routes to
// local workloads ("device routes" in Calico's words), as the settings
// hold them (nil: unset).
type DeviceConfig struct {
	Src4, Src6       string // deviceRouteSourceAddress, deviceRouteSourceAddressIPv6
	Proto            *int   // deviceRouteProtocol
	Metric4, Metric6 *int   // ipv4NormalRoutePriority, ipv6NormalRoutePriority
}

// Device shapes the routes to local workloads.
type Device struct {
	src4, src6 netip.Addr
	// proto is deviceRouteProtocol, 0 when unset (the agent's own,
	// rtproto.Workload). Set to 0 it is what netlink then writes,
	// RTPROT_BOOT, as in Calico.
	proto int
	// metric4, metric6 are ipv4/ipv6NormalRoutePriority (Calico's 1024
	// when unset): Calico v3.32's Felix gives workload routes the normal
	// priority. The elevated one is a live-migrating workload's only.
	metric4, metric6 int
}

// DeviceRoutes is the shape of the routes to local workloads that c asks for.
func DeviceRoutes(c DeviceConfig) Device {
	d := Device{metric4: defaultRoutePriority, metric6: defaultRoutePriority}
	if m := c.Metric4; m != nil {
		d.metric4 = *m
	}
	if m := c.Metric6; m != nil {
		d.metric6 = *m
	}
	if a, err := netip.ParseAddr(c.Src4); err == nil && a.Is4() {
		d.src4 = a
	}
	if a, err := netip.ParseAddr(c.Src6); err == nil && a.Is6() {
		d.src6 = a
	}
	if p := c.Proto; p != nil {
		d.proto = *p
		if d.proto == 0 {
			d.proto = unix.RTPROT_BOOT
		}
	}
	return d
}

// defaultRoutePriority is Calico's ipv4/ipv6NormalRoutePriority.
const defaultRoutePriority = 1024

// Proto is the protocol of the routes to local workloads, 0 for the
// agent's own (dataplane.Desired.DeviceRouteProtocol).
func (d Device) Proto() int { return d.proto }

// Target is the route to a local workload's address addr on iface.
func (d Device) Target(iface string, addr netip.Addr) dataplane.RouteTarget {
	t := dataplane.RouteTarget{Iface: iface, Src: d.src4, Proto: d.proto, Metric: d.metric4}
	if addr.Is6() {
		t.Src, t.Metric = d.src6, d.metric6
	}
	return t
}
