package rules

import (
	"strings"
	"testing"
)

// An established packet to or from a workload walks as few rules as
// possible (issue #14: every forwarded packet of a pod's flow walks these
// chains): in cali-tw-<iface> the conntrack accept is the first rule, in
// cali-fw-<iface> it follows only the anti-spoofing rules; clearing the
// marks comes after it, as in Calico.
func TestEstablishedAcceptedFirst(t *testing.T) {
	tb, _ := Render(Config{}, semanticsInput())
	const est = "-m conntrack --ctstate RELATED,ESTABLISHED"
	seen := 0
	for _, c := range tb.Filter {
		tw, fw := strings.HasPrefix(c.Name, "cali-tw-"), strings.HasPrefix(c.Name, "cali-fw-")
		if !tw && !fw {
			continue
		}
		seen++
		at := -1
		for i, r := range c.Rules {
			if r.Match == est && r.Action == "-j ACCEPT" {
				at = i
				break
			}
		}
		if at < 0 {
			t.Fatalf("%s has no conntrack accept: %+v", c.Name, c.Rules)
		}
		if tw && at != 0 {
			t.Errorf("%s: conntrack accept is rule %d, want the first", c.Name, at)
		}
		for _, r := range c.Rules[:at] {
			if !strings.Contains(r.Match, "-s ") && !strings.Contains(r.Comment, "source addresses") && r.Action != clearMark(DefaultMarkScratch) {
				t.Errorf("%s: %q %q runs before the conntrack accept; only anti-spoofing may", c.Name, r.Match, r.Action)
			}
		}
	}
	if seen != 2*len(semanticsInput().Endpoints) {
		t.Fatalf("saw %d endpoint chains", seen)
	}
}

// The anti-spoofing of an endpoint with several source addresses, now
// ahead of the chain's "Clear marks", does not trust a scratch mark the
// packet already carries: a spoofed packet of a known flow is dropped on
// the forward and the workload-to-host paths alike.
func TestAntiSpoofIgnoresStaleScratchMark(t *testing.T) {
	s := semanticsSim(t, Config{DefaultEndpointToHostAction: "Accept"})
	spoofed := packet{in: "cali-g", src: ip("10.0.0.8"), proto: 6, ct: "ESTABLISHED", mark: DefaultMarkScratch}
	toHost, fwd := spoofed, spoofed
	toHost.dst = ip("192.168.1.10")
	fwd.out, fwd.dst = "eth0", ip("8.8.8.8")
	for chain, p := range map[string]packet{ChainInput: toHost, ChainForward: fwd} {
		if got, _ := s.verdict(chain, p); got != "DROP" {
			t.Errorf("%s: spoofed source with a stale scratch mark: %s, want DROP", chain, got)
		}
		own := p
		own.src = ip("10.0.0.7")
		if got, _ := s.verdict(chain, own); got != "ACCEPT" {
			t.Errorf("%s: own address of an established flow: %s, want ACCEPT", chain, got)
		}
	}
}

// The rule every forwarded packet reaches first, clearing our marks,
// carries no text comment and runs only for a packet that has one of our
// marks (a native comparison under iptables-nft, so the unmarked packet
// skips the rule's comment and MARK target, each evaluated through
// nft_compat), with or without host endpoints; and it still clears a stale
// accept mark, so a packet arriving with one is not accepted for it.
func TestForwardFirstRuleHasNoTextComment(t *testing.T) {
	for _, heps := range []bool{false, true} {
		in := semanticsInput()
		if heps {
			in.HostEndpoints = hostInput().HostEndpoints
		}
		tb, _ := Render(Config{}, in)
		for _, c := range tb.Filter {
			if c.Name != ChainForward {
				continue
			}
			r := c.Rules[0]
			if !strings.HasPrefix(r.Action, "-j MARK --set-xmark 0x0/") || r.Comment != "" {
				t.Errorf("host endpoints %v: first rule of %s is %q %q (comment %q)", heps, c.Name, r.Match, r.Action, r.Comment)
			}
			if want := "-m mark ! --mark 0x0/" + strings.SplitN(r.Action, "/", 2)[1]; r.Match != want {
				t.Errorf("host endpoints %v: first rule of %s matches %q, want %q", heps, c.Name, r.Match, want)
			}
		}
	}
	s := semanticsSim(t, Config{})
	stale := packet{in: "eth0", out: "eth1", src: ip("192.0.2.1"), dst: ip("198.51.100.1"), proto: 6, ct: "NEW", mark: DefaultMarkAccept | DefaultMarkScratch}
	if got, p := s.verdict(ChainForward, stale); got != "RETURN" || p.mark&(DefaultMarkAccept|DefaultMarkScratch) != 0 {
		t.Errorf("non-workload packet with stale marks: %s, mark %#x; want RETURN with our marks cleared", got, p.mark)
	}
}
