package rules

import (
	"strings"
	"testing"
)

// Workloads may not send VXLAN (to FelixConfiguration vxlanPort) or
// IP-in-IP unless allowVXLANPacketsFromWorkloads /
// allowIPIPPacketsFromWorkloads say so (both false by default, as Calico).
func TestEncapFromWorkloads(t *testing.T) {
	vxlan := func(port int) packet { return wl("cali-a", "eth0", "10.0.0.1", "8.8.8.8", 17, port) }
	ipip := wl("cali-a", "eth0", "10.0.0.1", "8.8.8.8", 4, 0)
	for _, tc := range []struct {
		name string
		cfg  Config
		// verdicts for UDP 4789, UDP 4790 and IP-in-IP
		v4789, v4790, vIPIP string
		lines               string // the encapsulation drops in cali-fw-cali-a
	}{
		{"defaults", Config{}, "DROP", "ACCEPT", "DROP",
			"-p udp -m multiport --dports 4789 -j DROP  # Drop VXLAN encapped packets originating in workloads\n" +
				"-p 4 -j DROP  # Drop IPinIP encapped packets originating in workloads\n"},
		{"vxlanPort 4790", Config{VXLANPort: 4790}, "ACCEPT", "DROP", "DROP",
			"-p udp -m multiport --dports 4790 -j DROP  # Drop VXLAN encapped packets originating in workloads\n" +
				"-p 4 -j DROP  # Drop IPinIP encapped packets originating in workloads\n"},
		{"allowVXLANPacketsFromWorkloads", Config{AllowVXLANPacketsFromWorkloads: true}, "ACCEPT", "ACCEPT", "DROP",
			"-p 4 -j DROP  # Drop IPinIP encapped packets originating in workloads\n"},
		{"allowIPIPPacketsFromWorkloads", Config{AllowIPIPPacketsFromWorkloads: true}, "DROP", "ACCEPT", "ACCEPT",
			"-p udp -m multiport --dports 4789 -j DROP  # Drop VXLAN encapped packets originating in workloads\n"},
		{"both allowed", Config{AllowVXLANPacketsFromWorkloads: true, AllowIPIPPacketsFromWorkloads: true}, "ACCEPT", "ACCEPT", "ACCEPT", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := semanticsSim(t, tc.cfg)
			for _, c := range []struct {
				what string
				p    packet
				want string
			}{{"UDP 4789", vxlan(4789), tc.v4789}, {"UDP 4790", vxlan(4790), tc.v4790}, {"IP-in-IP", ipip, tc.vIPIP}} {
				if got, _ := s.verdict(ChainForward, c.p); got != c.want {
					t.Errorf("%s from a workload: %s, want %s", c.what, got, c.want)
				}
			}
			tb, _ := Render(tc.cfg, semanticsInput())
			var drops strings.Builder
			for _, l := range strings.SplitAfter(chainLines(t, tb.Filter, EndpointChainName("fw", "cali-a")), "\n") {
				if strings.Contains(l, "encapped") {
					drops.WriteString(l)
				}
			}
			if drops.String() != tc.lines {
				t.Errorf("encapsulation drops:\n%s\nwant:\n%s", drops.String(), tc.lines)
			}
		})
	}
	// IPv6 has no IP-in-IP drop; the VXLAN one follows the port.
	tb, _ := Render(Config{IPVersion: 6, VXLANPort: 4790}, semanticsInput())
	fw := chainLines(t, tb.Filter, EndpointChainName("fw", "cali-a"))
	if !strings.Contains(fw, "--dports 4790 -j DROP") || strings.Contains(fw, "-p 4 ") {
		t.Errorf("IPv6 cali-fw-cali-a:\n%s", fw)
	}
}

// TestEndpointChainsNeedNoResolver: no rule of an endpoint's chains names a
// port with --dport/--sport, which iptables resolves through getaddrinfo
// (an address dump of the whole namespace in every restore that adds a pod).
func TestEndpointChainsNeedNoResolver(t *testing.T) {
	for _, ver := range []int{4, 6} {
		tb, _ := Render(Config{IPVersion: ver}, semanticsInput())
		for _, c := range tb.Filter {
			if !strings.HasPrefix(c.Name, "cali-fw-") && !strings.HasPrefix(c.Name, "cali-tw-") {
				continue
			}
			for _, r := range c.Rules {
				if strings.Contains(r.Match, "--dport ") || strings.Contains(r.Match, "--sport ") {
					t.Errorf("IPv%d %s: %q", ver, c.Name, r.Match)
				}
			}
		}
	}
}
