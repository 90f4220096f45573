package calc_test

import (
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/iptables"
	"github.com/calico-aio/calico-aio/store/api"
)

func calicoNode(name, ipv4 string) *api.Node {
	n := newObj("Node").(*api.Node)
	n.Metadata.Name = name
	n.Spec.BGP = &api.NodeBGPSpec{IPv4Address: ipv4}
	return n
}

func felixDefault(set func(s *api.FelixConfigurationSpec)) *api.FelixConfiguration {
	f := newObj("FelixConfiguration").(*api.FelixConfiguration)
	f.Metadata.Name = "default"
	set(&f.Spec)
	return f
}

// natRule is the v4 cali-nat-outgoing rules of d, one a line.
func natRules(d calc.Desired) string {
	var out []string
	for _, c := range d.Tables[4].NAT {
		if c.Name == "cali-nat-outgoing" {
			for _, r := range c.Rules {
				out = append(out, r.Match+" "+r.Action)
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestNATOutgoingExclusionsHosts: with natOutgoingExclusions
// IPPoolsAndHostIPs the NAT outgoing rule also skips destinations in
// cali40all-hosts-net, which holds every node's IPv4 address (following
// node changes); IPPoolsOnly (the default) neither references nor keeps
// the set. iptablesNATOutgoingInterfaceFilter limits the rule to an
// outgoing interface.
func TestNATOutgoingExclusionsHosts(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("p", "10.64.0.0/24", true))
	ds.put(t, wep("default", "a", thisNode, "calia", nil, []string{"10.64.0.1/32"}, "open"))
	ds.put(t, profile("open", nil))
	ds.put(t, calicoNode(thisNode, "192.168.77.1/24"))
	ds.put(t, calicoNode("node2", "192.168.77.2"))
	s := fresh(t, ds, 0)
	apply := func(next datastore) calc.Desired {
		t.Helper()
		for _, u := range diff(t, ds, next) {
			s.Apply(u)
		}
		ds = next
		return s.Desired(false)
	}

	d := s.Desired(false)
	if _, ok := d.IPSets["cali40all-hosts-net"]; ok || strings.Contains(natRules(d), "all-hosts") {
		t.Fatalf("IPPoolsOnly (default): hosts set used:\n%s", dump(d))
	}
	next := ds.clone()
	next.put(t, felixDefault(func(s *api.FelixConfigurationSpec) { s.NATOutgoingExclusions = "IPPoolsAndHostIPs" }))
	d = apply(next)
	if r := natRules(d); !strings.Contains(r, "-m set ! --match-set cali40all-ipam-pools dst -m set ! --match-set cali40all-hosts-net dst -j MASQUERADE") {
		t.Fatalf("IPPoolsAndHostIPs: rule\n%s", r)
	}
	if got := strings.Join(d.IPSets["cali40all-hosts-net"].Members, " "); got != "192.168.77.1/32 192.168.77.2/32" {
		t.Fatalf("hosts set %q", got)
	}
	next = ds.clone()
	next.remove("Node", "", "node2")
	next.put(t, calicoNode("node3", "192.168.77.3"))
	d = apply(next)
	if got := strings.Join(d.IPSets["cali40all-hosts-net"].Members, " "); got != "192.168.77.1/32 192.168.77.3/32" {
		t.Fatalf("hosts set after node changes %q", got)
	}
	next = ds.clone()
	next.put(t, felixDefault(func(s *api.FelixConfigurationSpec) {
		s.NATOutgoingExclusions, s.IptablesNATOutgoingInterfaceFilter = "IPPoolsOnly", "eth+"
	}))
	d = apply(next)
	if _, ok := d.IPSets["cali40all-hosts-net"]; ok {
		t.Fatalf("IPPoolsOnly again: hosts set kept")
	}
	if r := natRules(d); r != "-m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -o eth+ -j MASQUERADE" {
		t.Fatalf("interface filter eth+: rule\n%s", r)
	}
}

// TestWorkloadSourceSpoofing: an endpoint's allowSpoofedSourcePrefixes
// widen its anti-spoofing rule only while workloadSourceSpoofing is Any
// (node.<name> overriding default); Disabled, Calico's default, ignores
// them.
func TestWorkloadSourceSpoofing(t *testing.T) {
	ds := datastore{}
	w := wep("default", "a", thisNode, "calia", nil, []string{"10.64.0.1/32"}, "open")
	w.Spec.AllowSpoofedSourcePrefixes = []string{"10.99.0.0/16"}
	ds.put(t, w)
	ds.put(t, profile("open", nil))
	s := fresh(t, ds, 0)
	spoofRules := func() string {
		return chainRules(s.Desired(false).Tables[4].Filter, "cali-fw-calia", func(r iptables.Rule) bool { return strings.Contains(r.Match, "-s ") })
	}
	step := func(what string, change func(next datastore), want bool) {
		t.Helper()
		advance(t, &ds, change, s.Apply)
		if got := strings.Contains(spoofRules(), "10.99.0.0/16"); got != want {
			t.Fatalf("%s: prefix in the anti-spoofing rules %v, want %v:\n%s", what, got, want, spoofRules())
		}
		if !strings.Contains(spoofRules(), "10.64.0.1/32") {
			t.Fatalf("%s: the endpoint's own address is not allowed:\n%s", what, spoofRules())
		}
	}
	mode := func(name, v string) func(datastore) {
		return putFelix(t, name, func(s *api.FelixConfigurationSpec) { s.WorkloadSourceSpoofing = v })
	}
	step("unset (Disabled)", func(datastore) {}, false)
	step("Any", mode("default", "Any"), true)
	step("node.<name> Disabled over default Any", mode("node."+thisNode, "Disabled"), false)
	step("node.<name> removed: default Any", func(next datastore) { next.remove("FelixConfiguration", "", "node."+thisNode) }, true)
	step("default Disabled", mode("default", "Disabled"), false)
}

// TestServiceLoopPreventionRendersNothing: every value of
// serviceLoopPrevention is accepted and leaves the desired state as it
// is: Calico renders it only for service CIDRs BGPConfiguration
// advertises, which this agent refuses at write; a bad value is refused
// naming the field.
func TestServiceLoopPreventionRendersNothing(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("p", "10.64.0.0/24", true))
	ds.put(t, wep("default", "a", thisNode, "calia", nil, []string{"10.64.0.1/32"}, "open"))
	ds.put(t, profile("open", nil))
	base := dump(fresh(t, ds, 0).Desired(false))
	for _, v := range []string{"Drop", "Reject", "Disabled"} {
		next := ds.clone()
		next.put(t, felixDefault(func(s *api.FelixConfigurationSpec) { s.ServiceLoopPrevention = v }))
		if got := dump(fresh(t, next, 0).Desired(false)); got != base {
			t.Errorf("serviceLoopPrevention %s changed the desired state:\n%s\nwant\n%s", v, got, base)
		}
	}
	bad := felixDefault(func(s *api.FelixConfigurationSpec) { s.ServiceLoopPrevention = "Block" })
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "spec.serviceLoopPrevention") {
		t.Errorf("serviceLoopPrevention Block: %v", err)
	}
	advertised := newObj("BGPConfiguration").(*api.BGPConfiguration)
	advertised.Metadata.Name = "default"
	advertised.Spec.ServiceClusterIPs = []api.ServiceIPBlock{{CIDR: "10.96.0.0/12"}}
	if err := advertised.Validate(); err == nil || !strings.Contains(err.Error(), "spec.serviceClusterIPs") {
		t.Errorf("advertised service CIDRs are accepted, so serviceLoopPrevention would have CIDRs to block: %v", err)
	}
}

// TestOverlayFilterDeny: iptablesFilterDenyAction reaches the overlay's
// filter rules (VXLAN and IP-in-IP from non-Calico hosts), node.<name>
// over default, as Calico denies those with it too.
func TestOverlayFilterDeny(t *testing.T) {
	o := calc.NewOverlay(thisNode)
	ds := datastore{}
	step := func(change func(next datastore), want bool) {
		t.Helper()
		advance(t, &ds, change, o.Apply)
		d := o.Desired()
		if d.V4.Deny.Reject != want || d.V6.Deny.Reject != want || d.IPIP.Deny.Reject != want {
			t.Fatalf("want Reject %v: V4 %v V6 %v IPIP %v", want, d.V4.Deny, d.V6.Deny, d.IPIP.Deny)
		}
	}
	deny := func(name, v string) func(datastore) {
		return putFelix(t, name, func(s *api.FelixConfigurationSpec) { s.IptablesFilterDenyAction = v })
	}
	step(func(datastore) {}, false)
	step(deny("default", "Reject"), true)
	step(deny("node."+thisNode, "Drop"), false)
	step(func(next datastore) { next.remove("FelixConfiguration", "", "node."+thisNode) }, true)
}
