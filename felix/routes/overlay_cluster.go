package routes

import (
	"log/slog"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/calico-aio/calico-aio/felix/calc"
)

// ParentIfaces names the interfaces holding this node's addresses that
// direct cluster routes leave by (FelixConfiguration
// programClusterRoutes, felix/calc/overlay_cluster.go); nil when there
// are none. An address no interface holds is left out: its routes go
// without a device.
func ParentIfaces(ov calc.OverlayDesired) map[netip.Addr]string {
	if !ov.Parent4.IsValid() && !ov.Parent6.IsValid() {
		return nil
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		slog.Warn("listing addresses for cluster routes", "err", err)
		return nil
	}
	out := map[netip.Addr]string{}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || (ip.Unmap() != ov.Parent4 && ip.Unmap() != ov.Parent6) {
			continue
		}
		if l, err := netlink.LinkByIndex(a.LinkIndex); err == nil {
			out[ip.Unmap()] = l.Attrs().Name
		}
	}
	return out
}
