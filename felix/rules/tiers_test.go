package rules

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// tiersInput: workloads a..g on cali-a.. (10.0.0.1..7), all with profile
// "open" (allow all) except where said. Tiers are given already ordered:
// "first" before "second".
//   - b ingress: first (Deny) [pass-a], second (Deny) [allow-80].
//   - d ingress: first (Pass) [deny-23], second (Deny) [allow-80].
//   - e ingress: second (Deny) [allow-80] only; first selects e not.
//   - f ingress: first (Pass) [deny-23] only, then its profile.
//   - g ingress: first (Deny) [pass-a] only, then its profile.
//   - h ingress: first (Deny) [pass-a], second (Pass) [deny-23]; no profile.
func tiersInput() Input {
	gnp := func(n string) PolicyKey { return PolicyKey{Name: n} }
	addr := func(i int) []netip.Addr { return []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})} }
	tier := func(name string, action api.Action, pols ...string) Tier {
		t := Tier{Name: name, DefaultAction: action}
		for _, p := range pols {
			t.Policies = append(t.Policies, gnp(p))
		}
		return t
	}
	open := []string{"open"}
	return Input{
		Endpoints: []Endpoint{
			{Iface: "cali-a", Addrs: addr(1), Profiles: open},
			{Iface: "cali-b", Addrs: addr(2), Profiles: open, IngressTiers: []Tier{
				tier("first", api.ActionDeny, "pass-a"), tier("second", api.ActionDeny, "allow-80")}},
			{Iface: "cali-c", Addrs: addr(3), Profiles: open},
			{Iface: "cali-d", Addrs: addr(4), Profiles: open, IngressTiers: []Tier{
				tier("first", api.ActionPass, "deny-23"), tier("second", api.ActionDeny, "allow-80")}},
			{Iface: "cali-e", Addrs: addr(5), Profiles: open, IngressTiers: []Tier{tier("second", api.ActionDeny, "allow-80")}},
			{Iface: "cali-f", Addrs: addr(6), Profiles: open, IngressTiers: []Tier{tier("first", api.ActionPass, "deny-23")}},
			{Iface: "cali-g", Addrs: addr(7), Profiles: open, IngressTiers: []Tier{tier("first", api.ActionDeny, "pass-a")}},
			{Iface: "cali-h", Addrs: addr(8), IngressTiers: []Tier{
				tier("first", api.ActionDeny, "pass-a"), tier("second", api.ActionPass, "deny-23")}},
		},
		Policies: map[PolicyKey]Policy{
			gnp("pass-a"):   {Ingress: []api.Rule{{Action: api.ActionPass, Source: api.EntityRule{Nets: []string{"10.0.0.1/32"}}}}},
			gnp("allow-80"): {Ingress: []api.Rule{{Action: api.ActionAllow, Protocol: proto("TCP"), Destination: api.EntityRule{Ports: portList("80")}}}},
			gnp("deny-23"):  {Ingress: []api.Rule{{Action: api.ActionDeny, Protocol: proto("TCP"), Destination: api.EntityRule{Ports: portList("23")}}}},
		},
		Profiles: map[string]Profile{"open": {Ingress: []api.Rule{{Action: api.ActionAllow}}, Egress: []api.Rule{{Action: api.ActionAllow}}}},
	}
}

func TestTiersSemantics(t *testing.T) {
	tb, specs := Render(Config{}, tiersInput())
	if len(specs) != 0 {
		t.Fatalf("sets: %+v", specs)
	}
	s := newSim(t, tb.Filter, nil)
	for _, tc := range []struct {
		name string
		p    packet
		want string
	}{
		{"pass in the first tier, allowed in the second", wl("cali-a", "cali-b", "10.0.0.1", "10.0.0.2", 6, 80), "ACCEPT"},
		{"pass in the first tier, second tier's default deny", wl("cali-a", "cali-b", "10.0.0.1", "10.0.0.2", 6, 81), "DROP"},
		{"first tier's default deny blocks what the second allows", wl("cali-c", "cali-b", "10.0.0.3", "10.0.0.2", 6, 80), "DROP"},
		{"first tier's default Pass, allowed in the second", wl("cali-c", "cali-d", "10.0.0.3", "10.0.0.4", 6, 80), "ACCEPT"},
		{"denied in the first tier despite its Pass default", wl("cali-c", "cali-d", "10.0.0.3", "10.0.0.4", 6, 23), "DROP"},
		{"default Pass, then the second tier's default deny", wl("cali-c", "cali-d", "10.0.0.3", "10.0.0.4", 6, 81), "DROP"},
		{"unselecting tier skipped: allowed", wl("cali-c", "cali-e", "10.0.0.3", "10.0.0.5", 6, 80), "ACCEPT"},
		{"unselecting tier skipped: default deny of the one that selects", wl("cali-c", "cali-e", "10.0.0.3", "10.0.0.5", 6, 81), "DROP"},
		{"last tier's default Pass: profiles decide", wl("cali-c", "cali-f", "10.0.0.3", "10.0.0.6", 6, 80), "ACCEPT"},
		{"last tier's deny before its default Pass", wl("cali-c", "cali-f", "10.0.0.3", "10.0.0.6", 6, 23), "DROP"},
		{"Pass in the last tier: profiles decide", wl("cali-a", "cali-g", "10.0.0.1", "10.0.0.7", 6, 80), "ACCEPT"},
		{"no verdict in the only tier: default deny, profiles not reached", wl("cali-c", "cali-g", "10.0.0.3", "10.0.0.7", 6, 80), "DROP"},
		{"through every tier, no profile", wl("cali-a", "cali-h", "10.0.0.1", "10.0.0.8", 6, 80), "DROP"},
		{"egress: no tier selects, profile allows", wl("cali-b", "cali-a", "10.0.0.2", "10.0.0.1", 6, 80), "ACCEPT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := s.verdict(ChainForward, tc.p); got != tc.want {
				t.Errorf("verdict %s, want %s", got, tc.want)
			}
		})
	}
}

// TestTiersRendering pins the per-tier section of an endpoint chain: each
// tier clears the pass mark, jumps to its policies while it stays clear,
// and a Deny tier ends with its drop; a Pass tier has none.
func TestTiersRendering(t *testing.T) {
	tb, _ := Render(Config{}, tiersInput())
	got := chainLines(t, tb.Filter, EndpointChainName("tw", "cali-d"))
	deny23, allow80 := PolicyChainName(DirIngress, PolicyKey{Name: "deny-23"}), PolicyChainName(DirIngress, PolicyKey{Name: "allow-80"})
	want := lines(
		"-j MARK --set-xmark 0x0/0x20000  # Start of tier first",
		"-m mark --mark 0x0/0x20000 -j "+deny23,
		"-m mark --mark 0x10000/0x10000 -j RETURN  # Return if policy accepted",
		"-j MARK --set-xmark 0x0/0x20000  # Start of tier second",
		"-m mark --mark 0x0/0x20000 -j "+allow80,
		"-m mark --mark 0x10000/0x10000 -j RETURN  # Return if policy accepted",
		"-m mark --mark 0x0/0x20000 -j DROP  # End of tier second. Drop if no policies passed packet",
		"-j cali-pri-open",
	)
	if !strings.Contains(got, want) {
		t.Errorf("cali-tw-cali-d:\n%s\nwant it to contain:\n%s", got, want)
	}
	// Rendering is deterministic.
	again, _ := Render(Config{}, tiersInput())
	if dump(again) != dump(tb) {
		t.Error("two renders of the same input differ")
	}
}
