package felix

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/calico-aio/calico-aio/felix/dataplane"
)

// deviceRouteSettings are the FelixConfiguration fields that shape the
// routes to local workloads ("device routes" in Calico's words).
type deviceRouteSettings struct {
	src4, src6 netip.Addr // deviceRouteSourceAddress, deviceRouteSourceAddressIPv6
	// proto is deviceRouteProtocol, 0 when unset (the agent's own,
	// rtproto.Workload). Set to 0 it is what netlink then writes,
	// RTPROT_BOOT, as in Calico.
	proto int
}

func deviceRoutes(s *spec) deviceRouteSettings {
	var d deviceRouteSettings
	if a, err := netip.ParseAddr(s.DeviceRouteSourceAddress); err == nil && a.Is4() {
		d.src4 = a
	}
	if a, err := netip.ParseAddr(s.DeviceRouteSourceAddressIPv6); err == nil && a.Is6() {
		d.src6 = a
	}
	if p := s.DeviceRouteProtocol; p != nil {
		d.proto = *p
		if d.proto == 0 {
			d.proto = unix.RTPROT_BOOT
		}
	}
	return d
}

// target is the route to a local workload's address addr on iface.
func (d deviceRouteSettings) target(iface string, addr netip.Addr) dataplane.RouteTarget {
	t := dataplane.RouteTarget{Iface: iface, Src: d.src4, Proto: d.proto}
	if addr.Is6() {
		t.Src = d.src6
	}
	return t
}
