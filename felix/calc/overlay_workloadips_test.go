package calc_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/store/api"
)

// routeSource: CalicoIPAM (the default) routes other nodes' blocks;
// WorkloadIPs routes each address of other nodes' workload endpoints
// (also one no block holds) and no block; an overlay fed only the changes
// follows a switch and endpoint changes as a fresh one computes.
func TestOverlayRouteSourceWorkloadIPs(t *testing.T) {
	ds := twoSubnetDatastore(t, api.VXLANModeAlways)
	ds.put(t, wep("default", "a", "node2", "cali1", nil, []string{"10.65.0.70/32"}))
	ds.put(t, wep("default", "b", "node3", "cali2", nil, []string{"10.65.9.9/32"}))  // no block holds it
	ds.put(t, wep("default", "c", thisNode, "cali3", nil, []string{"10.65.0.5/32"})) // local: no route
	ds.put(t, wep("default", "d", "node2", "cali4", nil, []string{"10.70.0.5/32"}))  // not an encapsulating pool
	routes := func(d calc.OverlayDesired) string {
		var out []string
		for _, line := range strings.Split(renderOverlay(d), "\n") {
			if strings.HasPrefix(line, "route ") {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}
	inc := calc.NewOverlay(thisNode)
	applyAllOverlay(inc, diff(t, datastore{}, ds))
	blocks := "route 10.65.0.128/26 via 10.65.0.129 dev vxlan onlink\nroute 10.65.0.64/26 via 10.65.0.65 dev vxlan onlink"
	if got := routes(inc.Desired()); got != blocks {
		t.Fatalf("CalicoIPAM routes:\n%s\nwant:\n%s", got, blocks)
	}
	step := func(what, want string, change func()) {
		t.Helper()
		before := ds.clone()
		change()
		applyAllOverlay(inc, diff(t, before, ds))
		if got, fresh := renderOverlay(inc.Desired()), overlayFor(t, ds, 0); got != fresh {
			t.Fatalf("%s: incremental differs from fresh:\n%s", what, textDiff(got, fresh))
		}
		if got := routes(inc.Desired()); got != want {
			t.Fatalf("%s: routes:\n%s\nwant:\n%s", what, got, want)
		}
	}
	felix := func(src string) func() {
		return func() {
			f := newObj("FelixConfiguration").(*api.FelixConfiguration)
			f.Metadata.Name, f.Spec.RouteSource = "default", src
			ds.put(t, f)
		}
	}
	step("WorkloadIPs", "route 10.65.0.70/32 via 10.65.0.65 dev vxlan onlink\nroute 10.65.9.9/32 via 10.65.0.129 dev vxlan onlink",
		felix("WorkloadIPs"))
	step("an endpoint moves", "route 10.65.0.71/32 via 10.65.0.65 dev vxlan onlink\nroute 10.65.9.9/32 via 10.65.0.129 dev vxlan onlink",
		func() { ds.put(t, wep("default", "a", "node2", "cali1", nil, []string{"10.65.0.71/32"})) })
	step("an endpoint goes", "route 10.65.0.71/32 via 10.65.0.65 dev vxlan onlink",
		func() { ds.remove("WorkloadEndpoint", "default", "node3-k8s-b-eth0") })
	step("back to CalicoIPAM", blocks, felix("CalicoIPAM"))
}
