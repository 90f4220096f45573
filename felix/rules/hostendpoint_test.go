package rules

import (
	"github.com/calico-aio/calico-aio/internal/golden"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// hostInput: workload cali-a (10.0.0.1, profile "open"); host endpoints
// eth0 (policies by kind below), eth1 (no policy, no profile) and "*".
//   - eth0 normal: allow tcp/8080 in, allow tcp/443 out; profile none.
//   - eth0 forward ingress: deny-all (a policy with no rules).
//   - eth0 pre-DNAT: deny tcp/30080; allow tcp/30081.
//   - eth0 untracked: allow tcp/7000 in and its replies out; deny tcp/7001.
//   - "*": profile "open".
func hostInput() Input {
	gnp := func(n string) PolicyKey { return PolicyKey{Name: n} }
	tier := func(ks ...string) []Tier {
		t := Tier{Name: "default", DefaultAction: api.ActionDeny}
		for _, k := range ks {
			t.Policies = append(t.Policies, gnp(k))
		}
		return []Tier{t}
	}
	tcp := func(action api.Action, port string) api.Rule {
		return api.Rule{Action: action, Protocol: proto("TCP"), Destination: api.EntityRule{Ports: portList(port)}}
	}
	return Input{
		Endpoints: []Endpoint{{Iface: "cali-a", Addrs: []netip.Addr{ip("10.0.0.1")}, Profiles: []string{"open"}}},
		HostEndpoints: []HostEndpoint{
			{Name: "eth0", Iface: "eth0", IngressTiers: tier("web"), EgressTiers: tier("https-out"),
				ForwardIngressTiers: tier("fwd-deny"), PreDNATTiers: tier("nodeport"),
				UntrackedIngressTiers: tier("raw-in"), UntrackedEgressTiers: tier("raw-out")},
			{Name: "eth1", Iface: "eth1"},
			{Name: "all", Iface: AllInterfaces, Profiles: []string{"open"}},
		},
		Policies: map[PolicyKey]Policy{
			gnp("web"):       {Ingress: []api.Rule{tcp(api.ActionAllow, "8080")}},
			gnp("https-out"): {Egress: []api.Rule{tcp(api.ActionAllow, "443")}},
			gnp("fwd-deny"):  {},
			gnp("nodeport"):  {Ingress: []api.Rule{tcp(api.ActionDeny, "30080"), tcp(api.ActionAllow, "30081")}},
			gnp("raw-in"):    {Ingress: []api.Rule{tcp(api.ActionAllow, "7000"), tcp(api.ActionDeny, "7001")}},
			gnp("raw-out"): {Egress: []api.Rule{{Action: api.ActionAllow, Protocol: proto("TCP"),
				Source: api.EntityRule{Ports: portList("7000")}}}},
		},
		Profiles: map[string]Profile{"open": {Ingress: []api.Rule{{Action: api.ActionAllow}}, Egress: []api.Rule{{Action: api.ActionAllow}}}},
	}
}

func TestHostEndpointGolden(t *testing.T) {
	tb, sets := Render(Config{}, hostInput())
	golden.Check(t, "hostendpoints", dump(tb)+"# ipsets\n"+dumpSets(sets))
}

func TestHostEndpointSemantics(t *testing.T) {
	tb, _ := Render(Config{}, hostInput())
	filter, raw, mangle := newSim(t, tb.Filter, nil), newSim(t, tb.Raw, nil), newSim(t, tb.Mangle, nil)
	in := func(iface string, dport int) packet {
		return packet{in: iface, src: ip("192.168.1.1"), dst: ip("192.168.1.10"), proto: 6, sport: 40000, dport: dport, ct: "NEW"}
	}
	out := func(iface string, proto, dport int) packet {
		return packet{out: iface, src: ip("192.168.1.10"), dst: ip("192.168.1.1"), proto: proto, sport: 40000, dport: dport, ct: "NEW"}
	}
	fwd := func(from, to string, dport int) packet {
		return packet{in: from, out: to, src: ip("192.168.1.1"), dst: ip("10.0.0.1"), proto: 6, sport: 40000, dport: dport, ct: "NEW"}
	}
	acc := DefaultMarkAccept
	for _, tc := range []struct {
		name  string
		s     *sim
		chain string
		p     packet
		want  string
	}{
		{"normal policy allows tcp/8080 to the host", filter, ChainInput, in("eth0", 8080), "ACCEPT"},
		{"no verdict: default drop", filter, ChainInput, in("eth0", 9090), "DROP"},
		{"failsafe ssh ahead of policy", filter, ChainInput, in("eth0", 22), "ACCEPT"},
		{"failsafe etcd ahead of policy", filter, ChainInput, in("eth0", 2379), "ACCEPT"},
		{"failsafe BGP ahead of policy", filter, ChainInput, in("eth0", 179), "ACCEPT"},
		{"no policy, no profile: default deny", filter, ChainInput, in("eth1", 8080), "DROP"},
		{"failsafe on a host endpoint with no policy", filter, ChainInput, in("eth1", 22), "ACCEPT"},
		{"established to the host", filter, ChainInput, packet{in: "eth1", proto: 6, ct: "ESTABLISHED"}, "ACCEPT"},
		{"* endpoint takes other interfaces", filter, ChainInput, in("eth9", 8080), "ACCEPT"},
		{"loopback not policed", filter, ChainInput, in("lo", 8080), "RETURN"},
		{"egress policy from the host", filter, ChainOutput, out("eth0", 6, 443), "ACCEPT"},
		{"egress default drop", filter, ChainOutput, out("eth0", 6, 80), "DROP"},
		{"outbound failsafe DNS", filter, ChainOutput, out("eth0", 17, 53), "ACCEPT"},
		{"outbound failsafe etcd", filter, ChainOutput, out("eth1", 6, 2379), "ACCEPT"},
		{"host to workload not policed", filter, ChainOutput, out("cali-a", 6, 80), "RETURN"},
		{"workload to host: workload path, not host endpoint", filter, ChainInput, packet{in: "cali-a", src: ip("10.0.0.1"), dst: ip("192.168.1.10"), proto: 6, dport: 8080, ct: "NEW"}, "DROP"},
		{"applyOnForward policy polices forwarded traffic", filter, ChainForward, fwd("eth0", "cali-a", 80), "DROP"},
		{"normal policy does not police forwarded traffic", filter, ChainForward, fwd("eth1", "cali-a", 80), "ACCEPT"},
		{"pre-DNAT allowed skips forward ingress policy", filter, ChainForward, func() packet { p := fwd("eth0", "cali-a", 80); p.mark = acc; return p }(), "ACCEPT"},
		{"untracked or pre-DNAT allowed accepted on INPUT", filter, ChainInput, func() packet { p := in("eth1", 8080); p.mark = acc; return p }(), "ACCEPT"},
		{"pre-DNAT deny", mangle, ChainManglePrerouting, in("eth0", 30080), "DROP"},
		{"pre-DNAT allow", mangle, ChainManglePrerouting, in("eth0", 30081), "ACCEPT"},
		{"pre-DNAT undecided goes on", mangle, ChainManglePrerouting, in("eth0", 30082), "RETURN"},
		{"pre-DNAT: failsafe first", mangle, ChainManglePrerouting, in("eth0", 22), "ACCEPT"},
		{"pre-DNAT: new flows only", mangle, ChainManglePrerouting, packet{in: "eth0", proto: 6, dport: 30080, ct: "ESTABLISHED"}, "ACCEPT"},
		{"pre-DNAT: not on other interfaces", mangle, ChainManglePrerouting, in("eth1", 30080), "RETURN"},
		{"untracked deny", raw, ChainRawPrerouting, in("eth0", 7001), "DROP"},
		{"untracked undecided goes on", raw, ChainRawPrerouting, in("eth0", 7002), "RETURN"},
		{"untracked: failsafe first", raw, ChainRawPrerouting, in("eth0", 22), "ACCEPT"},
		{"untracked egress: failsafe replies", raw, ChainRawOutput, packet{out: "eth0", proto: 6, sport: 22, dport: 40000}, "ACCEPT"},
		{"untracked egress undecided goes on", raw, ChainRawOutput, out("eth0", 6, 80), "RETURN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := tc.s.verdict(tc.chain, tc.p); got != tc.want {
				t.Errorf("verdict %s, want %s", got, tc.want)
			}
		})
	}
	// An untracked allow is not tracked, and carries the accept mark the
	// filter table accepts on; its replies are allowed by the egress rule.
	for _, p := range []packet{in("eth0", 7000), {out: "eth0", proto: 6, sport: 7000, dport: 40000}} {
		chain := ChainRawPrerouting
		if p.out != "" {
			chain = ChainRawOutput
		}
		got, after := raw.verdict(chain, p)
		if got != "ACCEPT" || !after.notrack || after.mark&acc == 0 {
			t.Errorf("%s %+v: verdict %s notrack %v mark %#x, want ACCEPT untracked with the accept mark", chain, p, got, after.notrack, after.mark)
		}
		fchain := ChainInput
		if p.out != "" {
			fchain = ChainOutput
		}
		if got, _ := filter.verdict(fchain, after); got != "ACCEPT" {
			t.Errorf("filter %s after raw: %s, want ACCEPT", fchain, got)
		}
	}
	// A failsafe port in raw is accepted but tracked.
	if _, after := raw.verdict(ChainRawPrerouting, in("eth0", 22)); after.notrack {
		t.Errorf("failsafe packet left untracked")
	}
}

// Failsafe ports can be turned off and changed, in every table.
func TestHostEndpointFailsafeConfig(t *testing.T) {
	in := Input{HostEndpoints: []HostEndpoint{{Name: "h", Iface: "eth0", PreDNATTiers: []Tier{{Name: "default", Policies: []PolicyKey{{Name: "x"}}}},
		UntrackedIngressTiers: []Tier{{Name: "default", Policies: []PolicyKey{{Name: "x"}}}}}},
		Policies: map[PolicyKey]Policy{{Name: "x"}: {Ingress: []api.Rule{{Action: api.ActionDeny}}}}}
	tb, _ := Render(Config{FailsafeInbound: []ProtoPort{{Protocol: "tcp", Port: 2222}}, FailsafeOutbound: []ProtoPort{}}, in)
	for name, chains := range map[string]*sim{"filter": newSim(t, tb.Filter, nil), "mangle": newSim(t, tb.Mangle, nil), "raw": newSim(t, tb.Raw, nil)} {
		chain := ChainInput
		if name != "filter" {
			chain = "cali-PREROUTING"
		}
		for port, want := range map[int]string{2222: "ACCEPT", 22: "DROP"} {
			p := packet{in: "eth0", proto: 6, dport: port, ct: "NEW"}
			if got, _ := chains.verdict(chain, p); got != want {
				t.Errorf("%s: port %d: %s, want %s", name, port, got, want)
			}
		}
	}
	// In raw, where nothing is tracked yet, the outbound chain holds only
	// the replies of inbound failsafe flows.
	if got := chainLines(t, tb.Raw, ChainFailsafeOut); strings.TrimSpace(got) != "-p tcp -m tcp --sport 2222 -j ACCEPT" {
		t.Errorf("raw outbound failsafe:\n%s", got)
	}
	for _, c := range tb.Filter {
		if c.Name == ChainFailsafeOut {
			t.Errorf("outbound failsafe chain rendered though disabled")
		}
		for _, r := range c.Rules {
			if strings.Contains(r.Action, ChainFailsafeOut) {
				t.Errorf("%s jumps to a disabled failsafe chain", c.Name)
			}
		}
	}
}

func TestHostEndpointChainNames(t *testing.T) {
	for _, tc := range []struct{ kind, iface, want string }{
		{"fh", "eth0", "cali-fh-eth0"}, {"th", "eth0", "cali-th-eth0"},
		{"fhfw", "eth0", "cali-fhfw-eth0"}, {"thfw", "eth0", "cali-thfw-eth0"},
		{"fh", AllInterfaces, "cali-fh-any-interface-at-all"},
	} {
		if got := HostEndpointChainName(tc.kind, tc.iface); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.kind, tc.iface, got, tc.want)
		}
	}
	if n := HostEndpointChainName("thfw", AllInterfaces); len(n) > MaxChainName || !strings.HasPrefix(n, "cali-thfw-") {
		t.Errorf("long name %q", n)
	}
}

// A "*" host endpoint protects the host from workload interfaces too:
// after the workload's egress policy, its ingress policy decides (unless
// DefaultEndpointToHostAction drops anyway); host to workload is never
// policed; it has no untracked policy.
func TestHostEndpointWildcardFromWorkloads(t *testing.T) {
	in := hostInput()
	wild := &in.HostEndpoints[2]
	wild.Profiles = nil
	wild.IngressTiers = []Tier{{Name: "default", DefaultAction: api.ActionDeny, Policies: []PolicyKey{{Name: "web"}}}}
	wild.UntrackedIngressTiers = []Tier{{Name: "default", Policies: []PolicyKey{{Name: "raw-in"}}}}
	toHost := func(port int) packet {
		return packet{in: "cali-a", src: ip("10.0.0.1"), dst: ip("192.168.1.10"), proto: 6, dport: port, ct: "NEW"}
	}
	for _, tc := range []struct {
		action string
		port   int
		want   string
	}{
		{"Accept", 8080, "ACCEPT"}, // the * endpoint's policy allows it
		{"Accept", 9090, "DROP"},   // ... not this
		{"Accept", 22, "ACCEPT"},   // failsafe
		{"Return", 9090, "DROP"},
		{"Return", 8080, "RETURN"},
		{"Drop", 8080, "DROP"},
	} {
		tb, _ := Render(Config{DefaultEndpointToHostAction: tc.action}, in)
		if got, _ := newSim(t, tb.Filter, nil).verdict(ChainInput, toHost(tc.port)); got != tc.want {
			t.Errorf("%s, pod->host:%d: %s, want %s", tc.action, tc.port, got, tc.want)
		}
		out := packet{out: "cali-a", src: ip("192.168.1.10"), dst: ip("10.0.0.1"), proto: 6, dport: 9090, ct: "NEW"}
		if got, _ := newSim(t, tb.Filter, nil).verdict(ChainOutput, out); got != "RETURN" {
			t.Errorf("host->pod policed: %s", got)
		}
		for _, c := range tb.Raw {
			if c.Name == HostEndpointChainName("fh", AllInterfaces) {
				t.Errorf("untracked chain rendered for a * host endpoint")
			}
		}
	}
	// Without a "*" endpoint, workload to host traffic is not host
	// endpoint traffic.
	in.HostEndpoints = in.HostEndpoints[:2]
	tb, _ := Render(Config{DefaultEndpointToHostAction: "Accept"}, in)
	if got, _ := newSim(t, tb.Filter, nil).verdict(ChainInput, toHost(9090)); got != "ACCEPT" {
		t.Errorf("named host endpoints police pod->host: %s", got)
	}
}

// The pre-DNAT policy of a "*" host endpoint sees traffic from workloads
// too; that of a named one only its interface's.
func TestHostEndpointWildcardPreDNAT(t *testing.T) {
	in := hostInput()
	in.HostEndpoints[2].PreDNATTiers = []Tier{{Name: "default", Policies: []PolicyKey{{Name: "nodeport"}}}}
	tb, _ := Render(Config{}, in)
	s := newSim(t, tb.Mangle, nil)
	for _, tc := range []struct {
		from string
		want string
	}{{"cali-a", "DROP"}, {"eth9", "DROP"}, {"eth0", "DROP"}, {"lo", "RETURN"}} {
		p := packet{in: tc.from, src: ip("10.0.0.1"), dst: ip("192.168.1.10"), proto: 6, dport: 30080, ct: "NEW"}
		if got, _ := s.verdict(ChainManglePrerouting, p); got != tc.want {
			t.Errorf("from %s: %s, want %s", tc.from, got, tc.want)
		}
	}
	in.HostEndpoints = in.HostEndpoints[:2]
	tb, _ = Render(Config{}, in)
	p := packet{in: "cali-a", src: ip("10.0.0.1"), dst: ip("192.168.1.10"), proto: 6, dport: 30080, ct: "NEW"}
	if got, _ := newSim(t, tb.Mangle, nil).verdict(ChainManglePrerouting, p); got != "RETURN" {
		t.Errorf("named host endpoint's pre-DNAT policy applied to workload traffic: %s", got)
	}
}
