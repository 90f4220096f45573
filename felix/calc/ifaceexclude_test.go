package calc_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// interfaceExclude (default kube-ipvs0): expectedIPs never resolve to an
// excluded interface, a host endpoint naming one does not apply, and a
// "*" host endpoint returns for the excluded names and the host
// interfaces a /regexp/ matches.
func TestInterfaceExcludeHostEndpoints(t *testing.T) {
	ds := datastore{}
	ds.put(t, hep("by-ip", thisNode, "", nil, []string{"192.168.9.10"}))
	ds.put(t, hep("named", thisNode, "eth3", nil, nil))
	ds.put(t, hep("all", thisNode, "*", nil, nil))
	ifaces := map[string][]netip.Addr{"kube-ipvs0": {netip.MustParseAddr("192.168.9.10")}, "eth3": {netip.MustParseAddr("192.168.3.1")},
		"veth7": {netip.MustParseAddr("192.168.7.1")}}
	desired := func(exclude string) ([]string, bool, bool) {
		t.Helper()
		f := newObj("FelixConfiguration").(*api.FelixConfiguration)
		f.Metadata.Name, f.Spec.InterfaceExclude = "default", exclude
		ds.put(t, f)
		s := fresh(t, ds, 0)
		s.SetHostInterfaces(ifaces)
		tb := s.Desired(false).Tables[4]
		var returns []string
		for _, c := range tb.Filter {
			if c.Name != "cali-from-host-endpoint" {
				continue
			}
			for _, r := range c.Rules {
				if r.Action == "-j RETURN" && r.Comment == "Excluded interface (interfaceExclude)" {
					returns = append(returns, r.Match)
				}
			}
		}
		return returns, hasChain(tb.Filter, "cali-fh-kube-ipvs0"), hasChain(tb.Filter, "cali-fh-eth3")
	}
	returns, byIP, named := desired("")
	if !slices.Equal(returns, []string{"-i kube-ipvs0"}) || byIP || !named {
		t.Errorf("default: * returns %v, expectedIPs on kube-ipvs0 %v, eth3 named %v", returns, byIP, named)
	}
	returns, byIP, named = desired("eth3,/^veth/")
	if !slices.Equal(returns, []string{"-i eth3", "-i veth7"}) || !byIP || named {
		t.Errorf("eth3,/^veth/: * returns %v, expectedIPs on kube-ipvs0 %v, eth3 named %v", returns, byIP, named)
	}
}
