package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// TestRouteMetricKernel: a workload route is programmed with its metric;
// a changed metric leaves one route with the new metric (the kernel keys
// routes by metric, so the old one is deleted, not left beside it); the
// CNI plugin's route written with the kernel's default metric is replaced
// the same way; IPv6's default metric (1024 for 0) is not churned; someone
// else's route to the prefix with another metric stays.
func TestRouteMetricKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	rm := newRouteManager(0)
	p4, p6 := netip.MustParsePrefix("10.65.0.1/32"), netip.MustParsePrefix("fd00:65::1/128")
	apply := func(m4, m6 int) string {
		t.Helper()
		routes := map[netip.Prefix]RouteTarget{p4: {Iface: "calitest1", Metric: m4}, p6: {Iface: "calitest2", Metric: m6}}
		if err := n.Do(func(ns.NetNS) error { rm.SetDesired(routes, true); return rm.Apply() }); err != nil {
			t.Fatal(err)
		}
		return show(t, n)
	}
	for _, step := range []struct {
		m4, m6 int
		before []string // ip route commands first
		want   string
	}{
		{1024, 1024, nil, "10.65.0.1 dev calitest1 proto 80 scope link metric 1024|fd00:65::1 dev calitest2 proto 80 metric 1024 pref medium"},
		{512, 0, nil, "10.65.0.1 dev calitest1 proto 80 scope link metric 512|fd00:65::1 dev calitest2 proto 80 metric 1024 pref medium"},
		{0, 2000, nil, "10.65.0.1 dev calitest1 proto 80 scope link|fd00:65::1 dev calitest2 proto 80 metric 2000 pref medium"},
		// The CNI plugin's route for a new pod (kernel default metric).
		{1024, 2000, []string{"-4 route del 10.65.0.1/32", "-4 route add 10.65.0.1/32 dev calitest1 proto 80 scope link"},
			"10.65.0.1 dev calitest1 proto 80 scope link metric 1024|fd00:65::1 dev calitest2 proto 80 metric 2000 pref medium"},
		// Someone else's route to the prefix (another protocol) stays.
		{1024, 2000, []string{"-4 route add 10.65.0.1/32 dev calitest1 proto static metric 7"},
			"10.65.0.1 dev calitest1 proto static scope link metric 7|10.65.0.1 dev calitest1 proto 80 scope link metric 1024|fd00:65::1 dev calitest2 proto 80 metric 2000 pref medium"},
	} {
		for _, c := range step.before {
			run(t, n, "ip", strings.Fields(c)...)
		}
		rm.dirty = true
		if got := apply(step.m4, step.m6); got != step.want {
			t.Errorf("metrics %d, %d after %v:\n%s\nwant\n%s", step.m4, step.m6, step.before, got, step.want)
		}
		if got := apply(step.m4, step.m6); got != step.want { // nothing left to do
			t.Errorf("metrics %d, %d applied again:\n%s", step.m4, step.m6, got)
		}
	}
}

// show is the namespace's routes to 10.65.0.1 and fd00:65::1, one a "|"
// separated line each.
func show(t *testing.T, n ns.NetNS) string {
	var lines []string
	for _, fam := range [][]string{{"-4", "10.65.0.1"}, {"-6", "fd00:65::1"}} {
		for _, l := range strings.Split(strings.TrimSpace(run(t, n, "ip", fam[0], "route", "show", fam[1])), "\n") {
			if l = strings.Join(strings.Fields(l), " "); l != "" {
				lines = append(lines, l)
			}
		}
	}
	return strings.Join(lines, "|")
}

// TestLearnedRouteMetricKernel: a learned (via) route's metric is programmed, a changed metric leaves exactly one route
// with the new one, and the kernel's defaults (0 for IPv4, 1024 for IPv6,
// both "unset") are stable: a second apply changes nothing.
func TestLearnedRouteMetricKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	rm := newRouteManager(0)
	apply := routeApplier(t, n, rm)
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
