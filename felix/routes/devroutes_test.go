package routes

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDeviceRouteSourceAndProtocol: deviceRouteSourceAddress(IPv6) is the
// source of the family's workload routes (an address of the other family
// is none); deviceRouteProtocol is their protocol, 0 meaning RTPROT_BOOT
// as netlink writes it, unset the agent's own (0 here); the normal route
// priority is their metric per family, 1024 when unset (from the
// settings: felix's TestRoutePrioritySettings).
func TestDeviceRouteSourceAndProtocol(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.65.0.1"), netip.MustParseAddr("fd00::1")
	d := DeviceRoutes(DeviceConfig{Src4: "192.0.2.1", Src6: "2001:db8::1", Proto: ptr(42), Metric4: ptr(100)})
	if got := d.Target("cali1", v4); got.String() != "dev cali1 src 192.0.2.1 metric 100" || got.Proto != 42 {
		t.Errorf("v4 workload route %+v", got)
	}
	if got := d.Target("cali1", v6); got.String() != "dev cali1 src 2001:db8::1 metric 1024" || got.Proto != 42 {
		t.Errorf("v6 workload route %+v", got)
	}
	if d.Proto() != 42 {
		t.Errorf("protocol %d, want 42", d.Proto())
	}
	d = DeviceRoutes(DeviceConfig{Src4: "2001:db8::1", Src6: "192.0.2.1", Proto: ptr(0)})
	if s4, s6 := d.Target("cali1", v4).Src, d.Target("cali1", v6).Src; s4.IsValid() || s6.IsValid() {
		t.Errorf("sources of the wrong family taken: %v, %v", s4, s6)
	}
	if d.Proto() != unix.RTPROT_BOOT {
		t.Errorf("deviceRouteProtocol 0: protocol %d, want RTPROT_BOOT", d.Proto())
	}
	if p := DeviceRoutes(DeviceConfig{}).Proto(); p != 0 {
		t.Errorf("unset: protocol %d, want 0 (the agent's own)", p)
	}
}

func ptr[T any](v T) *T { return &v }
