package dataplane

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// The CNI plugin writes a new pod's route (protocol 80, on its new cali*
// interface) before the pod's endpoint reaches the agent. An apply in
// between must not delete it: a workload route to an interface no desired
// route has named yet waits out the grace period. Once the interface has
// been desired, an undesired workload route to it goes at once (the
// endpoint was removed).
func TestRouteManagerSparesNewPodRoutes(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	n := newKernelNS(t, tools)
	ip := tools.real["ip"]
	m := newRouteManager(time.Hour)
	apply := func(d map[netip.Prefix]RouteTarget) {
		t.Helper()
		m.SetDesired(d, true)
		if err := n.Do(func(ns.NetNS) error { return m.Apply() }); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	has := func() bool {
		return strings.Contains(run(t, n, ip, "route", "show", "10.65.0.99/32"), "calitest4")
	}
	apply(map[netip.Prefix]RouteTarget{})
	run(t, n, ip, "route", "add", "10.65.0.99/32", "dev", "calitest4", "proto", "80", "scope", "link")
	apply(map[netip.Prefix]RouteTarget{netip.MustParsePrefix("10.65.0.1/32"): {Iface: "calitest1"}})
	if !has() {
		t.Fatal("a new pod's route, written before its endpoint arrived, was deleted")
	}
	apply(map[netip.Prefix]RouteTarget{netip.MustParsePrefix("10.65.0.99/32"): {Iface: "calitest4"}})
	apply(map[netip.Prefix]RouteTarget{})
	if has() {
		t.Fatal("the route of a removed endpoint stayed")
	}
}
