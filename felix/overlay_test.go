package felix

import (
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/dataplane"
)

// Routes learned over BGP inside a VXLAN pool are not programmed (the
// overlay's are); outside it they are; local routes win over both.
func TestAddOverlayBGPRoutes(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	ov := calc.OverlayDesired{
		Enabled:    true,
		Device:     calc.VXLANDeviceConfig{VNI: 4096, Port: 4789, Addr: addr("10.65.0.1"), MAC: "66:00:00:00:00:01", Parent: addr("10.0.1.1")},
		VTEPs:      []calc.VTEP{{Node: "n2", Addr: addr("10.65.0.65"), MAC: "66:00:00:00:00:02", NodeIP: addr("10.0.2.2")}},
		EncapPools: []netip.Prefix{pfx("10.65.0.0/16")},
		Routes: map[netip.Prefix]calc.OverlayRoute{
			pfx("10.65.0.64/26"):  {Via: addr("10.65.0.65"), Tunnel: true},
			pfx("10.65.0.128/26"): {Via: addr("10.0.1.3")},
			pfx("10.65.0.5/32"):   {Via: addr("10.65.0.65"), Tunnel: true}, // but a local pod has it
		},
	}
	des := dataplane.Desired{Routes: map[netip.Prefix]dataplane.RouteTarget{pfx("10.65.0.5/32"): {Iface: "cali1"}}}
	learned := map[netip.Prefix]dataplane.RouteTarget{
		pfx("10.65.0.64/26"):  {Via: []netip.Addr{addr("10.0.2.2")}},
		pfx("10.65.0.192/26"): {Via: []netip.Addr{addr("10.0.2.4")}},
		pfx("10.70.0.0/26"):   {Via: []netip.Addr{addr("10.0.2.4")}},
	}
	addOverlay(&des, ov, learned)
	want := map[string]string{
		"10.65.0.5/32":   "dev cali1",
		"10.65.0.64/26":  "via 10.65.0.65 dev vxlan.calico onlink",
		"10.65.0.128/26": "via 10.0.1.3",
		"10.70.0.0/26":   "via 10.0.2.4",
	}
	if len(des.Routes) != len(want) {
		t.Errorf("routes %v, want %v", des.Routes, want)
	}
	for p, w := range want {
		if got := des.Routes[pfx(p)].String(); got != w {
			t.Errorf("route %s: %q, want %q", p, got, w)
		}
	}
	if d := des.VXLAN.Device; d == nil || d.Name != "vxlan.calico" || d.Addr != addr("10.65.0.1") || len(des.VXLAN.Peers) != 1 {
		t.Errorf("device %+v peers %v", d, des.VXLAN.Peers)
	}
}
