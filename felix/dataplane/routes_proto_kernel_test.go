package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// A direct route the agent computes (CrossSubnet VXLAN to a node in this
// subnet) carries the agent's protocol, a BGP-learned one BGP's; a route
// left by an older agent with the other of our two protocols is replaced
// in place, and both still count as ours (removed when no longer desired).
func TestRouteProtocolKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	rm := newRouteManager(0)
	apply := routeApplier(t, n, rm)
	show := func() string {
		return strings.TrimSpace(run(t, n, "ip", "-4", "route", "show", "root", "10.65.0.0/16"))
	}
	direct, learned := netip.MustParsePrefix("10.65.0.128/26"), netip.MustParsePrefix("10.65.1.0/26")
	via := []netip.Addr{netip.MustParseAddr("172.30.0.3")}
	apply(map[netip.Prefix]RouteTarget{direct: {Via: via, Proto: rtproto.Workload}, learned: {Via: via}})
	want := "10.65.0.128/26 via 172.30.0.3 dev uplink proto 80 \n10.65.1.0/26 via 172.30.0.3 dev uplink proto 81"
	if got := show(); strings.ReplaceAll(got, " \n", "\n") != strings.ReplaceAll(want, " \n", "\n") {
		t.Fatalf("routes:\n%s\nwant:\n%s", got, want)
	}
	// An older agent programmed the direct route as BGP's: replaced.
	run(t, n, "ip", "route", "replace", "10.65.0.128/26", "via", "172.30.0.3", "proto", "81")
	rm.dirty = true
	apply(map[netip.Prefix]RouteTarget{direct: {Via: via, Proto: rtproto.Workload}, learned: {Via: via}})
	if got := show(); strings.ReplaceAll(got, " \n", "\n") != strings.ReplaceAll(want, " \n", "\n") {
		t.Fatalf("after a proto 81 leftover:\n%s\nwant:\n%s", got, want)
	}
	apply(map[netip.Prefix]RouteTarget{})
	if got := show(); got != "" {
		t.Fatalf("no routes desired, yet:\n%s", got)
	}
}
