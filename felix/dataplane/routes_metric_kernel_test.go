package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// A route's metric is programmed, a changed metric leaves exactly one route
// with the new one, and the kernel's defaults (0 for IPv4, 1024 for IPv6,
// both "unset") are stable: a second apply changes nothing.
func TestRouteMetricKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	rm := newRouteManager(0)
	apply := func(routes map[netip.Prefix]RouteTarget) {
		t.Helper()
		if err := n.Do(func(ns.NetNS) error { rm.SetDesired(routes, true); return rm.Apply() }); err != nil {
			t.Fatal(err)
		}
	}
	show := func() string {
		return strings.TrimSpace(run(t, n, "ip", "-4", "route", "show", "root", "10.66.0.0/16"))
	}
	learned := netip.MustParsePrefix("10.66.1.0/26")
	via := []netip.Addr{netip.MustParseAddr("172.30.0.3")}
	for _, c := range []struct {
		metric int
		want   string
	}{
		{0, "10.66.1.0/26 via 172.30.0.3 dev uplink proto 81"},
		{1024, "10.66.1.0/26 via 172.30.0.3 dev uplink proto 81 metric 1024"},
		{512, "10.66.1.0/26 via 172.30.0.3 dev uplink proto 81 metric 512"},
		{0, "10.66.1.0/26 via 172.30.0.3 dev uplink proto 81"},
	} {
		apply(map[netip.Prefix]RouteTarget{learned: {Via: via, Metric: c.metric}})
		if got := show(); got != c.want {
			t.Fatalf("metric %d:\n%s\nwant:\n%s", c.metric, got, c.want)
		}
		rm.dirty = true // read back: the kernel already has it
		apply(map[netip.Prefix]RouteTarget{learned: {Via: via, Metric: c.metric}})
		if got := show(); got != c.want {
			t.Fatalf("metric %d, applied again:\n%s\nwant:\n%s", c.metric, got, c.want)
		}
	}
	// IPv6: unset and 1024 are the same route; 2048 replaces it.
	run(t, n, "ip", "-6", "addr", "add", "fd00:30::2/64", "dev", "uplink", "nodad")
	show6 := func() string {
		return strings.TrimSpace(run(t, n, "ip", "-6", "route", "show", "root", "fd00:66::/48"))
	}
	p6 := netip.MustParsePrefix("fd00:66::/122")
	via6 := []netip.Addr{netip.MustParseAddr("fd00:30::3")}
	for _, c := range []struct {
		metric int
		want   string
	}{
		{0, "fd00:66::/122 via fd00:30::3 dev uplink proto 81 metric 1024 pref medium"},
		{1024, "fd00:66::/122 via fd00:30::3 dev uplink proto 81 metric 1024 pref medium"},
		{2048, "fd00:66::/122 via fd00:30::3 dev uplink proto 81 metric 2048 pref medium"},
	} {
		apply(map[netip.Prefix]RouteTarget{p6: {Via: via6, Metric: c.metric}})
		if got := show6(); got != c.want {
			t.Fatalf("IPv6 metric %d:\n%s\nwant:\n%s", c.metric, got, c.want)
		}
	}
	apply(map[netip.Prefix]RouteTarget{})
	if got := show() + show6(); got != "" {
		t.Fatalf("no routes desired, yet:\n%s", got)
	}
}
