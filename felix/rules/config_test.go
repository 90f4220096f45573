package rules

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// denyInput is hostInput with a workload whose ingress policy denies
// TCP 8080, so every kind of filter deny verdict is rendered.
func denyInput() Input {
	in := hostInput()
	k := PolicyKey{Name: "deny-8080"}
	in.Policies[k] = Policy{Key: k, Ingress: []api.Rule{
		{Action: api.ActionDeny, Protocol: proto("TCP"), Destination: api.EntityRule{Ports: portList("8080")}},
		{Action: api.ActionDeny, Source: api.EntityRule{Nets: []string{"10.1.0.0/16", "10.2.0.0/16"}, NotNets: []string{"10.1.1.0/24"}}},
	}}
	in.Endpoints[0].IngressPolicies = []PolicyKey{k}
	return in
}

// tableLines is every rule line of the chains whose name starts with
// prefix ("" for all).
func tableLines(chains []iptables.Chain, prefix string) []string {
	var out []string
	for _, c := range chains {
		if strings.HasPrefix(c.Name, prefix) {
			for _, r := range c.Rules {
				out = append(out, line(c.Name, r))
			}
		}
	}
	return out
}

func countWith(lines []string, subs ...string) int {
	n := 0
	for _, l := range lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

// TestFilterDenyAction: with iptablesFilterDenyAction Reject every filter
// deny verdict Calico applies it to is REJECT (policy Deny rules, the end
// of a tier, no profile matched, conntrack INVALID, encapsulated packets
// from workloads, unknown interfaces); the raw and mangle tables keep DROP
// (REJECT exists only in filter), and so do the verdicts Calico keeps as
// DROP (anti-spoofing, DefaultEndpointToHostAction Drop). Drop (the
// default) renders no REJECT at all.
func TestFilterDenyAction(t *testing.T) {
	in := denyInput()
	drop, _ := Render(Config{}, in)
	if d := dump(drop); strings.Contains(d, "REJECT") {
		t.Fatalf("default renders REJECT:\n%s", d)
	}
	rej, _ := Render(Config{FilterDenyAction: "Reject"}, in)
	filter := tableLines(rej.Filter, "")
	for _, want := range []struct {
		chain, match string
	}{
		{"-A cali-pi-", "--dport"},                      // policy Deny rule
		{"-A cali-pi-", "-m mark --mark"},               // policy Deny rule with the scratch mark
		{"-A cali-tw-cali-a", "End of tier default"},    // end of tier
		{"-A cali-tw-cali-a", "if no profiles matched"}, // no profile
		{"-A cali-fw-cali-a", "--ctstate INVALID"},
		{"-A cali-fh-eth0", "--ctstate INVALID"},
		{"-A cali-fw-cali-a", "VXLAN"},
		{"-A cali-fw-cali-a", "IPinIP"},
		{"-A cali-from-wl-dispatch", "Unknown interface"},
		{"-A cali-to-wl-dispatch", "Unknown interface"},
		{"-A cali-fhfw-eth0", "End of tier default"},
	} {
		if n := countWith(filter, want.chain, want.match, "-j REJECT"); n == 0 {
			t.Errorf("Reject: no REJECT in %s ... %s:\n%s", want.chain, want.match, strings.Join(filter, "\n"))
		}
	}
	if n := countWith(filter, "Reject if no profiles matched"); n == 0 {
		t.Errorf("Reject: comments do not name the verdict as Calico's do")
	}
	for _, keep := range []string{"Drop packets from unexpected source addresses", "Configured DefaultEndpointToHostAction", "127.0.0.0/8"} {
		if n := countWith(filter, keep, "-j DROP"); n == 0 {
			t.Errorf("Reject changed the DROP of %q", keep)
		}
	}
	for name, chains := range map[string][]iptables.Chain{"raw": rej.Raw, "mangle": rej.Mangle} {
		lines := tableLines(chains, "")
		if countWith(lines, "REJECT") != 0 {
			t.Errorf("%s table has REJECT:\n%s", name, strings.Join(lines, "\n"))
		}
		if countWith(lines, "-j DROP") == 0 {
			t.Errorf("%s table lost its policy DROP:\n%s", name, strings.Join(lines, "\n"))
		}
	}
	// The Drop rendering is the Reject one with the target swapped (and the
	// comments' verdict word): nothing else moves.
	norm := func(tb Tables) string {
		return strings.NewReplacer("-j REJECT", "-j DROP", "Reject ", "Drop ", ". Reject if", ". Drop if").Replace(dump(tb))
	}
	if norm(rej) != dump(drop) {
		t.Errorf("Reject differs from Drop by more than the target:\n%s\n---\n%s", norm(rej), dump(drop))
	}
}

// TestDisableConntrackInvalid: the workload and host endpoint chains drop
// what conntrack calls INVALID unless disableConntrackInvalidCheck; the
// established-flow accept stays either way.
func TestDisableConntrackInvalid(t *testing.T) {
	in := denyInput()
	on, _ := Render(Config{}, in)
	off, _ := Render(Config{DisableConntrackInvalid: true}, in)
	for _, chain := range []string{"cali-tw-cali-a", "cali-fw-cali-a", "cali-fh-eth0", "cali-th-eth0", "cali-fhfw-eth0"} {
		if n := countWith(tableLines(on.Filter, chain), "--ctstate INVALID", "-j DROP"); n != 1 {
			t.Errorf("default: %d INVALID drops in %s, want 1", n, chain)
		}
		if n := countWith(tableLines(off.Filter, chain), "--ctstate INVALID"); n != 0 {
			t.Errorf("disableConntrackInvalidCheck: %d INVALID rules in %s", n, chain)
		}
		if n := countWith(tableLines(off.Filter, chain), "--ctstate RELATED,ESTABLISHED"); n != 1 {
			t.Errorf("disableConntrackInvalidCheck: %d established-flow accepts in %s, want 1", n, chain)
		}
	}
}

// TestNATOutgoingOptions: natOutgoingExclusions IPPoolsAndHostIPs adds the
// hosts set to the NAT outgoing match (IPv4 only) and lists it among the
// sets in use; iptablesNATOutgoingInterfaceFilter limits every NAT
// outgoing rule (the port-range ones too) to the outgoing interface.
func TestNATOutgoingOptions(t *testing.T) {
	in := sampleInput(4)
	cfg := Config{NATOutgoingExcludeHosts: true, NATOutgoingInterface: "eth+", NATPortMin: 40000, NATPortMax: 40010}
	tb, sets := Render(cfg, in)
	got := chainLines(t, tb.NAT, ChainNATOutgoing)
	const m = "-m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -m set ! --match-set cali40all-hosts-net dst -o eth+"
	want := "-p tcp " + m + " -j MASQUERADE --to-ports 40000-40010\n" +
		"-p udp " + m + " -j MASQUERADE --to-ports 40000-40010\n" +
		m + " -j MASQUERADE\n"
	if got != want {
		t.Errorf("cali-nat-outgoing:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(dumpSets(sets), "cali40all-hosts-net") {
		t.Errorf("hosts set not among the sets in use:\n%s", dumpSets(sets))
	}
	tb6, sets6 := Render(Config{IPVersion: 6, NATOutgoingExcludeHosts: true}, sampleInput(6))
	if d := dump(tb6) + dumpSets(sets6); strings.Contains(d, "hosts") {
		t.Errorf("IPv6 references a hosts set:\n%s", d)
	}
	plain, plainSets := Render(Config{}, in)
	if d := chainLines(t, plain.NAT, ChainNATOutgoing) + dumpSets(plainSets); strings.Contains(d, "hosts") || strings.Contains(d, " -o ") {
		t.Errorf("defaults: hosts set or interface filter:\n%s", d)
	}
}
