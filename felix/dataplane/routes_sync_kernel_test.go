package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/internal/rtproto"
)

// TestRouteSyncDisabledKernel: with routeSyncDisabled the dataplane
// neither adds, changes nor removes the routes Felix programs in Calico
// (workload routes, the agent's own direct and VXLAN routes, blackholes
// when BGP does not run), while BGP's (learned, IP-in-IP) are still kept;
// blackholes are kept when BGP runs (BIRD's in Calico). Turned off again,
// everything converges.
func TestRouteSyncDisabledKernel(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	dp := New(Config{})
	via := []netip.Addr{netip.MustParseAddr("172.30.0.3")}
	p := netip.MustParsePrefix
	apply := func(sync RouteSync, routes map[netip.Prefix]RouteTarget) string {
		t.Helper()
		des := Desired{InSync: true, Routes: routes, RouteSync: sync, IPSets: map[string]IPSet{}}
		if err := n.Do(func(ns.NetNS) error { return dp.Apply(des) }); err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(run(t, n, "ip", "-4", "route", "show", "root", "10.0.0.0/8")), " ")
	}
	before := map[netip.Prefix]RouteTarget{
		p("10.65.0.1/32"):   {Iface: "calitest1"},
		p("10.65.0.0/26"):   {Blackhole: true},
		p("10.65.1.0/26"):   {Via: via, Proto: rtproto.Workload},
		p("10.66.0.0/26"):   {Via: via},
		p("10.67.0.0/26"):   {Via: via},
		p("10.65.0.64/26"):  {Blackhole: true},
		p("10.65.0.128/26"): {Blackhole: true},
	}
	all := apply(RouteSync{}, before)
	for _, want := range []string{"10.65.0.1 dev calitest1", "blackhole 10.65.0.0/26", "10.65.1.0/26 via 172.30.0.3", "10.66.0.0/26 via", "10.67.0.0/26 via"} {
		if !strings.Contains(all, want) {
			t.Fatalf("routes %q lack %q", all, want)
		}
	}
	// Everything Felix's goes from the desired set, other routes of
	// Felix's kind and of BGP's come; a learned route goes.
	after := map[netip.Prefix]RouteTarget{
		p("10.65.0.2/32"):   {Iface: "calitest2"},
		p("10.65.2.0/26"):   {Via: via, Proto: rtproto.Workload},
		p("10.65.0.192/26"): {Blackhole: true},
		p("10.66.0.0/26"):   {Via: via},
		p("10.68.0.0/26"):   {Via: via},
		p("10.65.0.64/26"):  {Blackhole: true},
	}
	got := apply(RouteSync{Disabled: true}, after)
	for _, kept := range []string{"10.65.0.1 dev calitest1", "blackhole 10.65.0.0/26", "10.65.1.0/26 via", "blackhole 10.65.0.128/26", "10.68.0.0/26 via", "10.66.0.0/26 via"} {
		if !strings.Contains(got, kept) {
			t.Errorf("routeSyncDisabled: %q gone or not added: %s", kept, got)
		}
	}
	for _, gone := range []string{"10.65.0.2 ", "10.65.2.0/26", "blackhole 10.65.0.192/26", "10.67.0.0/26"} {
		if strings.Contains(got+" ", gone) {
			t.Errorf("routeSyncDisabled: %q programmed or kept: %s", gone, got)
		}
	}
	// With BGP running the blackholes are BIRD's: kept in step.
	got = apply(RouteSync{Disabled: true, BGPBlackholes: true}, after)
	if strings.Contains(got, "blackhole 10.65.0.128/26") || !strings.Contains(got, "blackhole 10.65.0.192/26") ||
		!strings.Contains(got, "10.65.0.1 dev calitest1") || strings.Contains(got, "10.65.0.2 ") {
		t.Errorf("routeSyncDisabled with BGP: %s", got)
	}
	got = apply(RouteSync{}, after)
	for _, want := range []string{"10.65.0.2 dev calitest2", "10.65.2.0/26 via", "blackhole 10.65.0.192/26", "10.68.0.0/26 via"} {
		if !strings.Contains(got, want) {
			t.Errorf("routeSyncDisabled off: %q missing: %s", want, got)
		}
	}
	for _, gone := range []string{"10.65.0.1 ", "10.65.1.0/26", "blackhole 10.65.0.0/26", "10.65.0.128/26"} {
		if strings.Contains(got+" ", gone) {
			t.Errorf("routeSyncDisabled off: %q left: %s", gone, got)
		}
	}
}
