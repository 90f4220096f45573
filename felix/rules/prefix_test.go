package rules

import (
	"net/netip"
	"slices"
	"testing"
)

// interfacePrefix "cali,tap": every prefix gets the workload jumps of
// cali-FORWARD, cali-INPUT and cali-OUTPUT, and host endpoint dispatch
// returns for both; endpoints of either prefix are dispatched.
func TestWorkloadIfacePrefixes(t *testing.T) {
	cfg := Config{WorkloadIfacePrefix: "cali,tap", HostEndpoints: true}
	in := Input{
		Endpoints: []Endpoint{{Iface: "cali1", Addrs: []netip.Addr{netip.MustParseAddr("10.65.0.1")}},
			{Iface: "tap1", Addrs: []netip.Addr{netip.MustParseAddr("10.65.0.2")}}},
		HostEndpoints: []HostEndpoint{{Name: "all", Iface: AllInterfaces}},
	}
	tb, _ := Render(cfg, in)
	matches := func(name string) []string {
		for _, c := range tb.Filter {
			if c.Name == name {
				var out []string
				for _, r := range c.Rules {
					out = append(out, r.Match+" "+r.Action)
				}
				return out
			}
		}
		t.Fatalf("no chain %s", name)
		return nil
	}
	for chain, want := range map[string][]string{
		ChainForward:        {"-i cali+ -j " + ChainFromWlDispatch, "-i tap+ -j " + ChainFromWlDispatch, "-o cali+ -j " + ChainToWlDispatch, "-o tap+ -j " + ChainToWlDispatch},
		ChainInput:          {"-i cali+ -g " + ChainWorkloadToHost, "-i tap+ -g " + ChainWorkloadToHost},
		ChainOutput:         {"-o cali+ -j RETURN", "-o tap+ -j RETURN"},
		ChainFromHostEP:     {"-i cali+ -j RETURN", "-i tap+ -j RETURN"},
		ChainFromWlDispatch: {"-i cali1 -g " + EndpointChainName("fw", "cali1"), "-i tap1 -g " + EndpointChainName("fw", "tap1")},
	} {
		got := matches(chain)
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s lacks %q:\n%v", chain, w, got)
			}
		}
	}
}
