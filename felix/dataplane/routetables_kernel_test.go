package dataplane

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

// routeTableRange(s): the agent programs only the main table, so routes
// in any other table (Calico's range is 1-250; here tables 1, 100, 250
// and 1000) are never read, replaced or removed, even with our protocol
// numbers, on workload interfaces and for prefixes the agent also
// programs in main.
func TestRouteTableRangesLeftAlone(t *testing.T) {
	needKernel(t)
	n := newKernelNS(t, wrapTools(t))
	others := [][]string{
		{"10.65.0.1/32", "dev", "calitest1", "table", "1", "proto", "80"},
		{"10.65.0.9/32", "dev", "calitest2", "table", "100", "proto", "80"},
		{"10.66.0.0/26", "via", "172.30.0.9", "table", "250", "proto", "81"},
		{"blackhole", "10.65.0.0/26", "table", "1000", "proto", "80"},
		{"fd00:65::9/128", "dev", "calitest3", "table", "100", "proto", "80"},
	}
	for _, r := range others {
		run(t, n, "ip", append([]string{"route", "add"}, r...)...)
	}
	tables := func() string {
		var b strings.Builder
		for _, tbl := range []string{"1", "100", "250", "1000"} {
			b.WriteString(run(t, n, "ip", "-4", "route", "show", "table", tbl))
		}
		return b.String() + run(t, n, "ip", "-6", "route", "show", "table", "100")
	}
	before := tables()
	rm := newRouteManager(0) // no grace period: anything the manager thought its own would go at once
	for _, d := range []map[netip.Prefix]RouteTarget{
		{netip.MustParsePrefix("10.65.0.1/32"): {Iface: "calitest1"}, netip.MustParsePrefix("10.65.0.0/26"): {Blackhole: true}},
		{},
	} {
		if err := n.Do(func(ns.NetNS) error {
			rm.setDevice(77, nil)
			rm.SetDesired(d, true)
			rm.dirty = true
			return rm.Apply()
		}); err != nil {
			t.Fatal(err)
		}
		if got := tables(); got != before {
			t.Fatalf("other tables changed:\nbefore:\n%s\nafter:\n%s", before, got)
		}
	}
	if !strings.Contains(before, "10.65.0.9 dev calitest2") || !strings.Contains(before, "blackhole 10.65.0.0/26") ||
		!strings.Contains(before, "fd00:65::9 dev calitest3") {
		t.Fatalf("the test's routes are not there:\n%s", before)
	}
}
