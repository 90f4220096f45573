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
	// metric4, metric6 are ipv4/ipv6NormalRoutePriority (Calico's 1024
	// when unset): Calico v3.32's Felix gives workload routes the normal
	// priority. The elevated one is a live-migrating workload's only.
	metric4, metric6 int
}

func deviceRoutes(s *spec) deviceRouteSettings {
	d := deviceRouteSettings{metric4: defaultRoutePriority, metric6: defaultRoutePriority}
	if m := s.IPv4NormalRoutePriority; m != nil {
		d.metric4 = *m
	}
	if m := s.IPv6NormalRoutePriority; m != nil {
		d.metric6 = *m
	}
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

// defaultRoutePriority is Calico's ipv4/ipv6NormalRoutePriority.
const defaultRoutePriority = 1024

// target is the route to a local workload's address addr on iface.
func (d deviceRouteSettings) target(iface string, addr netip.Addr) dataplane.RouteTarget {
	t := dataplane.RouteTarget{Iface: iface, Src: d.src4, Proto: d.proto, Metric: d.metric4}
	if addr.Is6() {
		t.Src, t.Metric = d.src6, d.metric6
	}
	return t
}
