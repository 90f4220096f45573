package calc_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

func hep(name, node, iface string, labels map[string]string, ips []string, profiles ...string) *api.HostEndpoint {
	h := newObj("HostEndpoint").(*api.HostEndpoint)
	h.Metadata.Name, h.Metadata.Labels = name, labels
	h.Spec = api.HostEndpointSpec{Node: node, InterfaceName: iface, ExpectedIPs: ips, Profiles: profiles}
	return h
}

// hostPolicy is a GlobalNetworkPolicy of a host endpoint kind.
func hostPolicy(name, sel string, kind string, ingress, egress []api.Rule, types ...api.PolicyType) *api.GlobalNetworkPolicy {
	p := gnp(name, nil, sel, "", ingress, egress, types...)
	switch kind {
	case "forward":
		p.Spec.ApplyOnForward = true
	case "preDNAT":
		p.Spec.PreDNAT, p.Spec.ApplyOnForward = true, true
	case "untracked":
		p.Spec.DoNotTrack, p.Spec.ApplyOnForward = true, true
	}
	return p
}

// jumps lists the policies (by name) a chain of a table jumps to.
func jumps(cs []iptables.Chain, chain string, names ...string) []string {
	byChain := map[string]string{}
	for _, n := range names {
		for _, dir := range []string{rules.DirIngress, rules.DirEgress} {
			byChain[rules.PolicyChainName(dir, rules.PolicyKey{Name: n})] = n
		}
	}
	var out []string
	for _, c := range cs {
		if c.Name != chain {
			continue
		}
		for _, r := range c.Rules {
			if t, ok := strings.CutPrefix(r.Action, "-j "); ok && byChain[t] != "" {
				out = append(out, byChain[t])
			}
		}
	}
	return out
}

func hasChain(cs []iptables.Chain, name string) bool {
	return slices.ContainsFunc(cs, func(c iptables.Chain) bool { return c.Name == name })
}

// Which host endpoints are this node's, on which interfaces, with which
// labels, and which policies of which kind apply to them.
func TestHostEndpointSelection(t *testing.T) {
	ds := datastore{}
	ds.put(t, profile("dmz", map[string]string{"zone": "dmz"}))
	ds.put(t, hep("edge", thisNode, "eth0", map[string]string{"role": "edge"}, []string{"192.168.1.10"}, "dmz"))
	ds.put(t, hep("by-ip", thisNode, "", map[string]string{"role": "inner"}, []string{"192.168.9.10"}))
	ds.put(t, hep("other-node", "node2", "eth7", map[string]string{"role": "edge"}, nil))
	ds.put(t, hostPolicy("zone-dmz", "zone == 'dmz'", "normal", allow(), allow()))
	ds.put(t, hostPolicy("fwd", "role == 'edge'", "forward", allow(), nil, api.PolicyTypeIngress))
	ds.put(t, hostPolicy("nodeport", "role == 'edge'", "preDNAT", allow(), nil, api.PolicyTypeIngress))
	ds.put(t, hostPolicy("raw", "has(role)", "untracked", allow(), allow()))
	ds.put(t, np("default", "ns-all", nil, "all()", allow(), nil, api.PolicyTypeIngress))
	ds.put(t, wep("default", "pod", thisNode, "cali1", map[string]string{"role": "edge"}, []string{"10.65.0.2/32"}))

	s := fresh(t, ds, 0)
	if !s.NeedsHostInterfaces() {
		t.Errorf("a host endpoint by expectedIPs does not ask for the host's interfaces")
	}
	s.SetHostInterfaces(map[string][]netip.Addr{"eth9": {netip.MustParseAddr("192.168.9.10")}, "eth3": {netip.MustParseAddr("192.168.3.1")}})
	d := s.Desired(false)
	tb := d.Tables[4]
	all := []string{"zone-dmz", "fwd", "nodeport", "raw", "ns-all"}
	for _, tc := range []struct {
		name   string
		chains []iptables.Chain
		chain  string
		want   []string
	}{
		{"normal ingress by inherited label", tb.Filter, "cali-fh-eth0", []string{"fwd", "zone-dmz"}},
		{"normal egress", tb.Filter, "cali-th-eth0", []string{"zone-dmz"}},
		{"forward ingress: applyOnForward only", tb.Filter, "cali-fhfw-eth0", []string{"fwd"}},
		{"pre-DNAT in mangle", tb.Mangle, "cali-fh-eth0", []string{"nodeport"}},
		{"untracked in raw", tb.Raw, "cali-fh-eth0", []string{"raw"}},
		{"untracked egress in raw", tb.Raw, "cali-th-eth0", []string{"raw"}},
		{"by expectedIPs: the interface with the address", tb.Raw, "cali-fh-eth9", []string{"raw"}},
		{"by expectedIPs: no profile, no normal policy", tb.Filter, "cali-fh-eth9", nil},
		{"workload: neither pre-DNAT nor untracked policy", tb.Filter, rules.EndpointChainName("tw", "cali1"), []string{"fwd"}}, // (ns-all is namespaced: not named by this helper),
	} {
		if got := jumps(tc.chains, tc.chain, all...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %s jumps to %v, want %v", tc.name, tc.chain, got, tc.want)
		}
	}
	for _, name := range []string{"cali-fh-eth7", "cali-fh-eth3", "cali-thfw-eth0"} {
		if hasChain(tb.Filter, name) {
			t.Errorf("%s rendered (other node / no host endpoint / no egress forward policy)", name)
		}
	}
	if !hasChain(tb.Filter, "cali-fh-eth9") {
		t.Fatalf("host endpoint by expectedIPs not resolved to eth9")
	}

	// Host endpoints are members of selector sets by their expectedIPs,
	// with labels from their profiles.
	ds.put(t, gnp("from-dmz", nil, "role == 'x'", "", allowFrom("zone == 'dmz'", ""), nil, api.PolicyTypeIngress))
	ds.put(t, wep("default", "x", thisNode, "cali2", map[string]string{"role": "x"}, []string{"10.65.0.3/32"}))
	inc := fresh(t, ds, 0)
	inc.SetHostInterfaces(map[string][]netip.Addr{})
	d = checkFresh(t, "set", inc, ds)
	if got := set(t, d, 4, "zone == 'dmz'", ""); !slices.Equal(got, []string{"192.168.1.10/32"}) {
		t.Errorf("zone == dmz members %v", got)
	}
	// The profile's labels change: membership follows, incrementally.
	prev := ds.clone()
	ds.put(t, profile("dmz", map[string]string{"zone": "lan"}))
	applyAll(inc, diff(t, prev, ds))
	if got := set(t, checkFresh(t, "profile change", inc, ds), 4, "zone == 'dmz'", ""); len(got) != 0 {
		t.Errorf("after the profile change, members %v", got)
	}
	// Deleting the host endpoint removes its chains.
	ds.remove("HostEndpoint", "", "edge")
	inc = fresh(t, ds, 0)
	if d := inc.Desired(false); hasChain(d.Tables[4].Filter, "cali-fh-eth0") {
		t.Errorf("deleted host endpoint still rendered")
	}
}

// A host endpoint's named ports are usable in rules like a workload's.
func TestHostEndpointNamedPorts(t *testing.T) {
	ds := datastore{}
	h := hep("edge", thisNode, "eth0", map[string]string{"role": "edge"}, []string{"192.168.1.10", "fd00::10"})
	h.Spec.Ports = []api.EndpointPort{{Name: "admin", Protocol: api.ProtocolFromString("TCP"), Port: 8443}, {Name: "admin", Protocol: api.ProtocolFromString("UDP"), Port: 8443}}
	ds.put(t, h)
	ds.put(t, hostPolicy("admin-in", "role == 'edge'", "normal",
		[]api.Rule{{Action: api.ActionAllow, Protocol: protoPtr("TCP"), Destination: api.EntityRule{Selector: "role == 'edge'", Ports: []api.Port{api.NamedPort("admin")}}}}, nil, api.PolicyTypeIngress))
	d := fresh(t, ds, 0).Desired(true)
	name4 := rules.IPSetName(4, rules.IPSetSpec{Kind: rules.IPSetNamedPort, Selector: "role == 'edge'", PortName: "admin", Protocol: "tcp"})
	name6 := rules.IPSetName(6, rules.IPSetSpec{Kind: rules.IPSetNamedPort, Selector: "role == 'edge'", PortName: "admin", Protocol: "tcp"})
	if got := d.IPSets[name4].Members; !slices.Equal(got, []string{"192.168.1.10,tcp:8443"}) {
		t.Errorf("v4 named port set %s = %v", name4, got)
	}
	if got := d.IPSets[name6].Members; !slices.Equal(got, []string{"fd00::10,tcp:8443"}) {
		t.Errorf("v6 named port set %s = %v", name6, got)
	}
}

func protoPtr(s string) *api.Protocol { p := api.ProtocolFromString(s); return &p }
