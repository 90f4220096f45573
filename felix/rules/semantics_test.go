package rules

import (
	"net/netip"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// semanticsInput: workloads a, b, c, d, e, f, g on cali-a.. (10.0.0.1..7).
//   - b's ingress: deny tcp/23, pass from c, log + allow tcp/80 from
//     role=frontend (a); then profile "open".
//   - d's egress: allow udp/53 only (no profile).
//   - e: no policy, no profile.
//   - f's ingress: allow unless from a or c (two notNets).
//   - g may also send from 192.168.0.0/24.
//   - a, c, g: profile "open".
func semanticsInput() Input {
	gnp := func(n string) PolicyKey { return PolicyKey{Name: n} }
	addr := func(i int) []netip.Addr { return []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})} }
	open := []string{"open"}
	return Input{
		Endpoints: []Endpoint{
			{Iface: "cali-a", Addrs: addr(1), Profiles: open},
			{Iface: "cali-b", Addrs: addr(2), IngressPolicies: []PolicyKey{gnp("deny-telnet"), gnp("pass-c"), gnp("allow-web")}, Profiles: open},
			{Iface: "cali-c", Addrs: addr(3), Profiles: open},
			{Iface: "cali-d", Addrs: addr(4), EgressPolicies: []PolicyKey{gnp("dns-only")}},
			{Iface: "cali-e", Addrs: addr(5)},
			{Iface: "cali-f", Addrs: addr(6), IngressPolicies: []PolicyKey{gnp("not-a-c")}},
			{Iface: "cali-g", Addrs: addr(7), Profiles: open, AllowSpoofedFrom: []netip.Prefix{pfx("192.168.0.0/24")}},
		},
		Policies: map[PolicyKey]Policy{
			gnp("deny-telnet"): {Ingress: []api.Rule{{Action: api.ActionDeny, Protocol: proto("TCP"), Destination: api.EntityRule{Ports: portList("23")}}}},
			gnp("pass-c"):      {Ingress: []api.Rule{{Action: api.ActionPass, Source: api.EntityRule{Nets: []string{"10.0.0.3/32"}}}}},
			gnp("allow-web"): {Ingress: []api.Rule{
				{Action: api.ActionLog},
				{Action: api.ActionAllow, Protocol: proto("TCP"), Source: api.EntityRule{Selector: "role == 'frontend'"}, Destination: api.EntityRule{Ports: portList("80")}},
			}},
			gnp("dns-only"): {Egress: []api.Rule{{Action: api.ActionAllow, Protocol: proto("UDP"), Destination: api.EntityRule{Ports: portList("53")}}}},
			gnp("not-a-c"):  {Ingress: []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{NotNets: []string{"10.0.0.1/32", "10.0.0.3/32"}}}}},
		},
		Profiles: map[string]Profile{"open": {Ingress: []api.Rule{{Action: api.ActionAllow}}, Egress: []api.Rule{{Action: api.ActionAllow}}}},
	}
}

func semanticsSim(t *testing.T, cfg Config) *sim {
	tb, specs := Render(cfg, semanticsInput())
	sets := map[string][]string{}
	for _, s := range specs {
		if s.Selector == `role == "frontend"` {
			sets[s.Name] = []string{"10.0.0.1/32"}
		}
	}
	if len(sets) != 1 || len(specs) != 1 {
		t.Fatalf("sets: %+v", specs)
	}
	return newSim(t, tb.Filter, sets)
}

func wl(from, to string, src, dst string, proto, dport int) packet {
	return packet{in: from, out: to, src: ip(src), dst: ip(dst), proto: proto, sport: 40000, dport: dport, ct: "NEW"}
}

func TestSemanticsForward(t *testing.T) {
	s := semanticsSim(t, Config{})
	for _, tc := range []struct {
		name string
		p    packet
		want string
		logs int
	}{
		{"allowed by policy", wl("cali-a", "cali-b", "10.0.0.1", "10.0.0.2", 6, 80), "ACCEPT", 1},
		{"denied by an earlier policy", wl("cali-a", "cali-b", "10.0.0.1", "10.0.0.2", 6, 23), "DROP", 0},
		{"no policy verdict: default deny before profiles", wl("cali-a", "cali-b", "10.0.0.1", "10.0.0.2", 6, 8080), "DROP", 1},
		{"pass skips later policies, profile allows", wl("cali-c", "cali-b", "10.0.0.3", "10.0.0.2", 6, 8080), "ACCEPT", 0},
		{"deny before the pass still denies", wl("cali-c", "cali-b", "10.0.0.3", "10.0.0.2", 6, 23), "DROP", 0},
		{"profile only", wl("cali-b", "cali-a", "10.0.0.2", "10.0.0.1", 17, 9), "ACCEPT", 0},
		{"egress policy allows", wl("cali-d", "cali-a", "10.0.0.4", "10.0.0.1", 17, 53), "ACCEPT", 0},
		{"egress default deny", wl("cali-d", "cali-a", "10.0.0.4", "10.0.0.1", 6, 53), "DROP", 0},
		{"no policies no profiles: ingress", wl("cali-a", "cali-e", "10.0.0.1", "10.0.0.5", 6, 80), "DROP", 0},
		{"no policies no profiles: egress", wl("cali-e", "cali-a", "10.0.0.5", "10.0.0.1", 6, 80), "DROP", 0},
		{"notNets: allowed", wl("cali-b", "cali-f", "10.0.0.2", "10.0.0.6", 6, 80), "ACCEPT", 0},
		{"notNets: first excluded", wl("cali-a", "cali-f", "10.0.0.1", "10.0.0.6", 6, 80), "DROP", 0},
		{"notNets: second excluded", wl("cali-c", "cali-f", "10.0.0.3", "10.0.0.6", 6, 80), "DROP", 0},
		{"spoofed source", wl("cali-a", "cali-b", "10.0.0.9", "10.0.0.2", 6, 80), "DROP", 0},
		{"spoofed source of an established flow", packet{in: "cali-a", out: "eth0", src: ip("10.0.0.2"), dst: ip("8.8.8.8"), proto: 6, ct: "ESTABLISHED"}, "DROP", 0},
		{"allowed spoofed source", wl("cali-g", "eth0", "192.168.0.5", "8.8.8.8", 6, 443), "ACCEPT", 0},
		{"own address among several", wl("cali-g", "eth0", "10.0.0.7", "8.8.8.8", 6, 443), "ACCEPT", 0},
		{"unexpected address among several", wl("cali-g", "eth0", "10.0.0.8", "8.8.8.8", 6, 443), "DROP", 0},
		{"established reply", packet{in: "cali-b", out: "cali-e", src: ip("10.0.0.2"), dst: ip("10.0.0.5"), proto: 6, ct: "ESTABLISHED"}, "ACCEPT", 0},
		{"invalid", packet{in: "eth0", out: "cali-a", src: ip("8.8.8.8"), dst: ip("10.0.0.1"), proto: 6, ct: "INVALID"}, "DROP", 0},
		{"VXLAN from a workload", wl("cali-a", "eth0", "10.0.0.1", "8.8.8.8", 17, 4789), "DROP", 0},
		{"IPIP from a workload", wl("cali-a", "eth0", "10.0.0.1", "8.8.8.8", 4, 0), "DROP", 0},
		{"from outside to a workload", wl("eth0", "cali-b", "8.8.8.8", "10.0.0.2", 6, 8080), "DROP", 1},
		{"unknown workload interface", wl("cali-zz", "eth0", "10.0.0.9", "8.8.8.8", 6, 80), "DROP", 0},
		{"not workload traffic: not ours", wl("eth0", "eth1", "1.1.1.1", "2.2.2.2", 6, 80), "RETURN", 0},
		{"stale accept mark cleared", packet{in: "eth0", out: "eth1", src: ip("1.1.1.1"), dst: ip("2.2.2.2"), proto: 6, ct: "NEW", mark: 0x10000}, "RETURN", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, p := s.verdict(ChainForward, tc.p)
			if got != tc.want || p.logged != tc.logs {
				t.Errorf("verdict %s logged %d, want %s logged %d", got, p.logged, tc.want, tc.logs)
			}
			if got == "ACCEPT" && p.mark&DefaultMarkScratch != 0 {
				t.Errorf("scratch mark left set: %#x", p.mark)
			}
		})
	}
}

func TestSemanticsHost(t *testing.T) {
	toHost := func(from, src string, proto, dport int) packet {
		return packet{in: from, src: ip(src), dst: ip("192.168.1.10"), proto: proto, dport: dport, ct: "NEW"}
	}
	toLoopback := func(ct string) packet {
		return packet{in: "cali-a", src: ip("10.0.0.1"), dst: ip("127.0.0.1"), proto: 6, dport: 8080, ct: ct}
	}
	for _, tc := range []struct {
		action, name, chain string
		p                   packet
		want                string
	}{
		{"", "workload to host dropped by default", ChainInput, toHost("cali-a", "10.0.0.1", 6, 22), "DROP"},
		{"Accept", "workload to host accepted", ChainInput, toHost("cali-a", "10.0.0.1", 6, 22), "ACCEPT"},
		{"Accept", "egress policy still applies", ChainInput, toHost("cali-d", "10.0.0.4", 6, 80), "DROP"},
		{"Accept", "spoofing still dropped", ChainInput, toHost("cali-a", "10.0.0.2", 6, 80), "DROP"},
		{"Return", "host rules decide", ChainInput, toHost("cali-a", "10.0.0.1", 6, 22), "RETURN"},
		{"", "no host endpoints: the host's rules decide even for failsafe ports", ChainInput, toHost("eth0", "192.168.1.1", 6, 22), "RETURN"},
		{"", "other host traffic not ours", ChainInput, toHost("eth0", "192.168.1.1", 6, 80), "RETURN"},
		{"", "no host endpoints: outbound host traffic not ours", ChainOutput, packet{out: "eth0", src: ip("192.168.1.10"), dst: ip("1.1.1.1"), proto: 17, dport: 53, ct: "NEW"}, "RETURN"},
		{"", "host to workload not policed", ChainOutput, packet{out: "cali-e", src: ip("192.168.1.10"), dst: ip("10.0.0.5"), proto: 6, dport: 80, ct: "NEW"}, "RETURN"},
		{"", "established reply to the host", ChainInput, packet{in: "cali-e", src: ip("10.0.0.5"), dst: ip("192.168.1.10"), proto: 6, ct: "ESTABLISHED"}, "ACCEPT"},
		{"Accept", "workload to the host's loopback dropped", ChainInput, toLoopback("NEW"), "DROP"},
		{"Return", "workload to the host's loopback dropped before the host's rules", ChainInput, toLoopback("NEW"), "DROP"},
		{"Accept", "workload to the host's loopback dropped even in a known flow", ChainInput, toLoopback("ESTABLISHED"), "DROP"},
		{"Accept", "workload DNATed to the host's loopback accepted", ChainInput, toLoopback("NEW,DNAT"), "ACCEPT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := semanticsSim(t, Config{DefaultEndpointToHostAction: tc.action})
			if got, _ := s.verdict(tc.chain, tc.p); got != tc.want {
				t.Errorf("verdict %s, want %s", got, tc.want)
			}
		})
	}
}
