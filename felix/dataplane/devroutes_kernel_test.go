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
