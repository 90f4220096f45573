package dataplane

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// routeShow is ip's view of the route to dst (one line, spaces collapsed).
func routeShow(t *testing.T, n ns.NetNS, dst string) string {
	t.Helper()
	fam := "-4"
	if strings.Contains(dst, ":") {
		fam = "-6"
	}
	return strings.Join(strings.Fields(run(t, n, "ip", fam, "route", "show", dst)), " ")
}

// A workload route's src (deviceRouteSourceAddress) is programmed, and a
// changed or removed src replaces the route in place.
func TestRouteManagerSourceAddressKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	rm := newRouteManager(time.Hour)
	apply := func(src4, src6 string) {
		t.Helper()
		t4 := RouteTarget{Iface: "calitest1"}
		t6 := RouteTarget{Iface: "calitest1"}
		if src4 != "" {
			t4.Src = netip.MustParseAddr(src4)
		}
		if src6 != "" {
			t6.Src = netip.MustParseAddr(src6)
		}
		d := map[netip.Prefix]RouteTarget{netip.MustParsePrefix("10.65.0.1/32"): t4, netip.MustParsePrefix("fd00:65::1/128"): t6}
		if err := n.Do(func(ns.NetNS) error { rm.SetDesired(d, true); return rm.Apply() }); err != nil {
			t.Fatal(err)
		}
	}
	want := func(dst, line string) {
		t.Helper()
		if got := routeShow(t, n, dst); got != line {
			t.Fatalf("route %s:\n got %q\nwant %q", dst, got, line)
		}
	}
	apply("", "")
	want("10.65.0.1/32", "10.65.0.1 dev calitest1 proto 80 scope link")
	want("fd00:65::1/128", "fd00:65::1 dev calitest1 proto 80 metric 1024 pref medium")
	apply("172.30.0.1", "fd00:30::1")
	want("10.65.0.1/32", "10.65.0.1 dev calitest1 proto 80 scope link src 172.30.0.1")
	want("fd00:65::1/128", "fd00:65::1 dev calitest1 proto 80 src fd00:30::1 metric 1024 pref medium")
	apply("", "fd00:30::1")
	want("10.65.0.1/32", "10.65.0.1 dev calitest1 proto 80 scope link")
	want("fd00:65::1/128", "fd00:65::1 dev calitest1 proto 80 src fd00:30::1 metric 1024 pref medium")
}

// deviceRouteProtocol: workload routes carry it and change it in place;
// an undesired route with a number used before the change is still ours
// (deleted at once); a restarted manager with another number replaces
// the desired routes and removes an older number's leftovers as foreign
// routes on a workload interface (after the grace period); routes with
// the number on other interfaces are never touched.
func TestRouteManagerDeviceProtocolKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	// Someone else's routes with the numbers we will use, off workload
	// interfaces.
	run(t, n, "ip", "route", "add", "10.99.0.0/24", "dev", "uplink", "proto", "boot")
	run(t, n, "ip", "route", "add", "10.98.0.1/32", "dev", "uplink", "proto", "77")
	foreign := func() {
		t.Helper()
		for dst, want := range map[string]string{"10.99.0.0/24": "10.99.0.0/24 dev uplink scope link",
			"10.98.0.1/32": "10.98.0.1 dev uplink proto 77 scope link"} {
			if got := routeShow(t, n, dst); got != want {
				t.Fatalf("someone else's route %s: %q, want %q", dst, got, want)
			}
		}
	}
	wl := func(proto int, ifaces ...string) map[netip.Prefix]RouteTarget {
		d := map[netip.Prefix]RouteTarget{}
		for i, iface := range ifaces {
			d[netip.MustParsePrefix("10.65.0."+string(rune('1'+i))+"/32")] = RouteTarget{Iface: iface, Proto: proto}
		}
		return d
	}
	apply := func(rm *routeManager, proto int, d map[netip.Prefix]RouteTarget) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error {
			rm.setDevice(proto, nil)
			rm.SetDesired(d, true)
			return rm.Apply()
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(lines ...string) {
		t.Helper()
		got := strings.TrimSpace(run(t, n, "ip", "-4", "route", "show", "root", "10.65.0.0/24"))
		got = strings.Join(strings.Fields(strings.ReplaceAll(got, "\n", " | ")), " ")
		if w := strings.Join(lines, " | "); got != w {
			t.Fatalf("workload routes:\n got %q\nwant %q", got, w)
		}
		foreign()
	}
	rm := newRouteManager(time.Hour)
	apply(rm, 3, wl(3, "calitest1", "calitest2", "calitest3"))
	want("10.65.0.1 dev calitest1 scope link", "10.65.0.2 dev calitest2 scope link",
		"10.65.0.3 dev calitest3 scope link")
	// (ip shows no "proto boot": it is the default.) A live change: 77; 10.65.0.3 is no longer desired and goes at once
	// although it still has the number used before.
	apply(rm, 77, wl(77, "calitest1", "calitest2"))
	want("10.65.0.1 dev calitest1 proto 77 scope link", "10.65.0.2 dev calitest2 proto 77 scope link")
	apply(rm, 77, wl(77, "calitest1"))
	want("10.65.0.1 dev calitest1 proto 77 scope link")
	// A restart with 66: the desired route is replaced; 10.65.0.2, a
	// leftover of the previous run (77), is foreign to this one and goes
	// after the grace period.
	run(t, n, "ip", "route", "add", "10.65.0.2/32", "dev", "calitest2", "proto", "77", "scope", "link")
	rm2 := newRouteManager(time.Hour)
	now := time.Now()
	rm2.now = func() time.Time { return now }
	apply(rm2, 66, wl(66, "calitest1"))
	want("10.65.0.1 dev calitest1 proto 66 scope link", "10.65.0.2 dev calitest2 proto 77 scope link")
	now = now.Add(2 * time.Hour)
	apply(rm2, 66, wl(66, "calitest1"))
	want("10.65.0.1 dev calitest1 proto 66 scope link")
	// Back to the default: our own number.
	apply(rm2, 0, wl(0, "calitest1"))
	want("10.65.0.1 dev calitest1 proto 80 scope link")
}
