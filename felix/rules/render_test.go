package rules

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"github.com/calico-aio/calico-aio/internal/golden"
	"net/netip"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

// sampleInput is one endpoint with one policy and one profile, a second
// endpoint with only the profile, a floating IP and a natOutgoing pool.
func sampleInput(v int) Input {
	a, b, ext, pool := "10.65.0.2", "10.65.0.3", "172.16.1.2", "10.65.0.0/16"
	if v == 6 {
		a, b, ext, pool = "fd00:65::2", "fd00:65::3", "2001:db8::2", "fd00:65::/48"
	}
	web := PolicyKey{Namespace: "prod", Name: "web"}
	return Input{
		Endpoints: []Endpoint{
			{Iface: "cali1234567890a", Addrs: []netip.Addr{ip(a)}, IngressPolicies: []PolicyKey{web}, EgressPolicies: []PolicyKey{web},
				Profiles: []string{"kns.prod"}, NATs: []NAT{{Internal: ip(a), External: ip(ext)}}},
			{Iface: "cali0aaaaaaaaaa", Addrs: []netip.Addr{ip(b)}, Profiles: []string{"kns.prod"}},
		},
		Policies: map[PolicyKey]Policy{web: {Key: web,
			Ingress: []api.Rule{{Action: api.ActionAllow, Protocol: proto("TCP"),
				Source: api.EntityRule{Selector: "app == 'frontend'"}, Destination: api.EntityRule{Ports: portList("80")}}},
			Egress: []api.Rule{
				{Action: api.ActionAllow, Protocol: proto("UDP"), Destination: api.EntityRule{Ports: portList("53")}},
				{Action: api.ActionPass},
			}}},
		Profiles: map[string]Profile{"kns.prod": {Name: "kns.prod",
			Ingress: []api.Rule{{Action: api.ActionAllow}}, Egress: []api.Rule{{Action: api.ActionAllow}}}},
		NATOutgoingPools: []netip.Prefix{pfx(pool)},
		AllPools:         []netip.Prefix{pfx(pool)},
	}
}

func TestGolden(t *testing.T) {
	custom := Config{
		HostEndpoints:               true,
		DefaultEndpointToHostAction: "Accept",
		FailsafeInbound:             []ProtoPort{{Protocol: "tcp", Port: 22, Net: pfx("192.168.0.0/16")}, {Protocol: "tcp", Port: 23, Net: pfx("fd00::/8")}},
		FailsafeOutbound:            []ProtoPort{},
		WorkloadIfacePrefix:         "tap",
		MarkAccept:                  0x100, MarkPass: 0x200, MarkScratch: 0x400,
	}
	customInput := Input{Endpoints: []Endpoint{{Iface: "tap0", Addrs: []netip.Addr{ip("10.0.0.1"), ip("10.0.0.2"), ip("fd00::1")},
		AllowSpoofedFrom: []netip.Prefix{pfx("192.168.7.0/24")}}}}
	for _, tc := range []struct {
		name string
		cfg  Config
		in   Input
	}{
		{"v4", Config{IPVersion: 4}, sampleInput(4)},
		{"v6", Config{IPVersion: 6, DefaultEndpointToHostAction: "Return"}, sampleInput(6)},
		{"custom", custom, customInput},
		{"empty", Config{}, Input{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, sets := Render(tc.cfg, tc.in)
			golden.Check(t, tc.name, dump(tb)+"# ipsets\n"+dumpSets(sets))
		})
	}
}

// manyEndpoints is n endpoints with interfaces named like the CNI plugin
// names them: "cali" + 11 hex characters of a hash.
func manyEndpoints(n int) []Endpoint {
	eps := make([]Endpoint, n)
	for i := range eps {
		sum := sha1.Sum([]byte(fmt.Sprintf("ns.pod-%d", i)))
		eps[i] = Endpoint{Iface: "cali" + hex.EncodeToString(sum[:])[:11], Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 65, byte(i >> 8), byte(i)})}}
	}
	return eps
}

func TestDispatchTree(t *testing.T) {
	tb, _ := Render(Config{}, Input{Endpoints: manyEndpoints(20)})
	var disp []iptables.Chain
	for _, c := range tb.Filter {
		if strings.Contains(c.Name, "-dispatch") {
			disp = append(disp, c)
		}
	}
	golden.Check(t, "dispatch", dump(Tables{Filter: disp}))

	// At or below the fan-out, one flat chain.
	tb, _ = Render(Config{}, Input{Endpoints: manyEndpoints(dispatchFanout)})
	if got := strings.Count(chainLines(t, tb.Filter, ChainFromWlDispatch), "\n"); got != dispatchFanout+1 {
		t.Errorf("flat dispatch has %d rules, want %d", got, dispatchFanout+1)
	}
}

func TestEndpointToHostAction(t *testing.T) {
	for in, want := range map[string]string{"": "-j DROP", "Drop": "-j DROP", "ACCEPT": "-j ACCEPT", "Accept": "-j ACCEPT", "Return": "-j RETURN"} {
		tb, _ := Render(Config{DefaultEndpointToHostAction: in}, Input{})
		got := chainLines(t, tb.Filter, ChainWorkloadToHost)
		loopback := "-d 127.0.0.0/8 -m conntrack ! --ctstate DNAT -j DROP  # Drop workload traffic to the host's loopback unless DNATed there"
		if w := lines(loopback, "-j cali-from-wl-dispatch", want+"  # Configured DefaultEndpointToHostAction"); got != w {
			t.Errorf("%q: got\n%swant\n%s", in, got, w)
		}
	}
}

func TestFailsafeDefaults(t *testing.T) {
	// Without host endpoints there are no failsafe chains: the host's own rules decide.
	tb, _ := Render(Config{}, Input{})
	for _, c := range tb.Filter {
		if c.Name == ChainFailsafeIn || c.Name == ChainFailsafeOut {
			t.Fatalf("failsafe chain %s rendered without host endpoints", c.Name)
		}
	}
	tb, _ = Render(Config{HostEndpoints: true}, Input{})
	in := chainLines(t, tb.Filter, ChainFailsafeIn)
	out := chainLines(t, tb.Filter, ChainFailsafeOut)
	for _, want := range []string{"tcp 22", "udp 68", "tcp 179", "tcp 2379", "tcp 2380", "tcp 5473", "tcp 6443", "tcp 6666", "tcp 6667"} {
		p, port, _ := strings.Cut(want, " ")
		if !strings.Contains(in, "-p "+p+" -m "+p+" --dport "+port+" -j ACCEPT\n") {
			t.Errorf("inbound failsafe lacks %s:\n%s", want, in)
		}
	}
	for _, want := range []string{"udp 53", "udp 67", "tcp 179", "tcp 2379", "tcp 2380", "tcp 5473", "tcp 6443", "tcp 6666", "tcp 6667"} {
		p, port, _ := strings.Cut(want, " ")
		if !strings.Contains(out, "-p "+p+" -m "+p+" --dport "+port+" -j ACCEPT\n") {
			t.Errorf("outbound failsafe lacks %s:\n%s", want, out)
		}
	}
	if strings.Count(in, "\n") != 9 || strings.Count(out, "\n") != 9 {
		t.Errorf("want 9 failsafe rules each way:\n%s%s", in, out)
	}
	// An empty list removes the chain and its jump.
	tb, _ = Render(Config{HostEndpoints: true, FailsafeInbound: []ProtoPort{}, FailsafeOutbound: []ProtoPort{}}, Input{})
	for _, c := range tb.Filter {
		if c.Name == ChainFailsafeIn || c.Name == ChainFailsafeOut {
			t.Errorf("failsafe chain %s rendered though disabled", c.Name)
		}
	}
	if got := chainLines(t, tb.Filter, ChainInput); strings.Contains(got, "failsafe") {
		t.Errorf("cali-INPUT still jumps to failsafe:\n%s", got)
	}
}

func TestNATOutgoingOnlyWithPools(t *testing.T) {
	in := sampleInput(4)
	in.NATOutgoingPools = nil
	tb, sets := Render(Config{}, in)
	if got := chainLines(t, tb.NAT, ChainNATOutgoing); got != "" {
		t.Errorf("cali-nat-outgoing without natOutgoing pools:\n%s", got)
	}
	for _, s := range sets {
		if s.Kind == IPSetPools {
			t.Errorf("pool set %s without natOutgoing pools", s.Name)
		}
	}
	masq := IPSetSpec{Kind: IPSetPools, NATOutgoing: true}
	if got := in.PoolSetMembers(masq); got != nil {
		t.Errorf("masq members %v", got)
	}
	if got := in.PoolSetMembers(IPSetSpec{Kind: IPSetPools}); len(got) != 1 {
		t.Errorf("all-pools members %v", got)
	}
}

func TestFloatingIPsOfOtherVersionSkipped(t *testing.T) {
	in := Input{Endpoints: []Endpoint{{Iface: "cali1", Addrs: []netip.Addr{ip("10.0.0.1")},
		NATs: []NAT{{Internal: ip("10.0.0.1"), External: ip("2001:db8::1")}, {Internal: ip("10.0.0.1"), External: ip("1.2.3.4")}}}}}
	tb, _ := Render(Config{}, in)
	if got, want := chainLines(t, tb.NAT, ChainFloatingIPDNAT), lines("-d 1.2.3.4/32 -j DNAT --to-destination 10.0.0.1"); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	tb, _ = Render(Config{IPVersion: 6}, in)
	if got := chainLines(t, tb.NAT, ChainFloatingIPDNAT); got != "" {
		t.Errorf("v6 dnat:\n%s", got)
	}
}
