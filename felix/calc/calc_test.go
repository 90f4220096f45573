package calc_test

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/felix/calc"
	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/store/api"
	"github.com/calico-aio/calico-aio/store/etcdv3"
)

// Which policies apply to which local endpoint, in which order and
// direction: namespaced NetworkPolicy only in its namespace,
// GlobalNetworkPolicy everywhere (narrowed by its namespaceSelector),
// order then name (global before namespaced on a tie), unordered last,
// types deciding the direction. Every step also checks the incremental
// result against a state built from scratch.
func TestPolicySelectionAndOrder(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("v4", "10.65.0.0/16", false))
	ds.put(t, profile("kns.prod", map[string]string{"pcns.env": "production"}))
	ds.put(t, profile("kns.dev", map[string]string{"pcns.env": "dev"}))
	ds.put(t, wep("prod", "a", thisNode, "calia", map[string]string{"app": "web"}, []string{"10.65.0.2/32"}, "kns.prod"))
	ds.put(t, wep("dev", "b", thisNode, "calib", map[string]string{"app": "web"}, []string{"10.65.0.3/32"}, "kns.dev"))
	ds.put(t, wep("prod", "remote", "node2", "caliremote", map[string]string{"app": "web"}, []string{"10.65.1.2/32"}, "kns.prod"))
	ds.put(t, np("prod", "np-web", order(10), "app == 'web'", allow(), nil))
	ds.put(t, np("prod", "np-db", order(10), "app == 'db'", allow(), nil))
	ds.put(t, np("dev", "np-all", order(7), "", allow(), nil))
	ds.put(t, np("dev", "same", order(10), "all()", allow(), nil))
	ds.put(t, gnp("same", order(10), "all()", "", allow(), nil))
	ds.put(t, gnp("gnp-web", order(10), "app == 'web'", "", allow(), nil))
	ds.put(t, gnp("b-late", nil, "all()", "", allow(), nil))
	ds.put(t, gnp("a-late", nil, "all()", "", allow(), nil))
	ds.put(t, gnp("prod-ns", order(5), "all()", "env == 'production'", allow(), nil))
	ds.put(t, gnp("first", order(1), "all()", "", allow(), allow(), api.PolicyTypeEgress))
	ds.put(t, gnp("both", order(2), "app == 'web'", "", allow(), allow()))
	known := []rules.PolicyKey{{Namespace: "prod", Name: "np-web"}, {Namespace: "prod", Name: "np-db"}, {Namespace: "dev", Name: "np-all"},
		{Namespace: "dev", Name: "same"}, {Name: "same"}, {Name: "gnp-web"}, {Name: "b-late"}, {Name: "a-late"},
		{Name: "prod-ns"}, {Name: "first"}, {Name: "both"}}

	expect := func(d calc.Desired, iface string, in, out []string) {
		t.Helper()
		if got := policyJumps(d, 4, rules.DirIngress, iface, known); !slices.Equal(got, in) {
			t.Errorf("%s ingress policies:\n got %v\nwant %v", iface, got, in)
		}
		if got := policyJumps(d, 4, rules.DirEgress, iface, known); !slices.Equal(got, out) {
			t.Errorf("%s egress policies:\n got %v\nwant %v", iface, got, out)
		}
	}

	inc := calc.NewState(thisNode)
	applyAll(inc, diff(t, datastore{}, ds))
	inc.Apply(calc.Update{InSync: true})
	d := checkFresh(t, "initial", inc, ds)
	expect(d, "calia",
		[]string{"both", "prod-ns", "gnp-web", "prod/np-web", "same", "a-late", "b-late"},
		[]string{"first", "both"})
	expect(d, "calib",
		[]string{"both", "dev/np-all", "gnp-web", "same", "dev/same", "a-late", "b-late"},
		[]string{"first", "both"})
	if d.LocalPolicies != 10 { // all but prod/np-db
		t.Errorf("LocalPolicies = %d, want 10", d.LocalPolicies)
	}
	if len(d.Endpoints) != 2 {
		t.Errorf("endpoints %+v: want only the two local ones", d.Endpoints)
	}

	steps := []struct {
		name   string
		change func(datastore)
		calia  [2][]string // its ingress, egress policies
	}{
		{"endpoint label change", func(ds datastore) {
			ds.put(t, wep("prod", "a", thisNode, "calia", map[string]string{"app": "db"}, []string{"10.65.0.2/32"}, "kns.prod"))
		}, [2][]string{{"prod-ns", "prod/np-db", "same", "a-late", "b-late"}, {"first"}}},
		{"namespace label change", func(ds datastore) {
			ds.put(t, profile("kns.prod", map[string]string{"pcns.env": "staging"}))
		}, [2][]string{{"prod/np-db", "same", "a-late", "b-late"}, {"first"}}},
		{"policy order change", func(ds datastore) {
			ds.put(t, gnp("b-late", order(0), "all()", "", allow(), nil))
		}, [2][]string{{"b-late", "prod/np-db", "same", "a-late"}, {"first"}}},
		{"policy types change", func(ds datastore) {
			ds.put(t, gnp("first", order(1), "all()", "", allow(), allow()))
		}, [2][]string{{"b-late", "first", "prod/np-db", "same", "a-late"}, {"first"}}},
		{"policy delete", func(ds datastore) {
			ds.remove("NetworkPolicy", "prod", "np-db")
		}, [2][]string{{"b-late", "first", "same", "a-late"}, {"first"}}},
		{"policy selector change", func(ds datastore) {
			ds.put(t, gnp("same", order(10), "app == 'web'", "", allow(), nil))
		}, [2][]string{{"b-late", "first", "a-late"}, {"first"}}},
	}
	prev := ds
	for _, s := range steps {
		next := prev.clone()
		s.change(next)
		applyAll(inc, diff(t, prev, next))
		d := checkFresh(t, s.name, inc, next)
		expect(d, "calia", s.calia[0], s.calia[1])
		prev = next
	}
}

// Labels a profile applies are seen by policy selectors and by rule
// selectors (IP sets); the endpoint's own labels win, then its profiles in
// the order listed (the first wins, as in Calico's label inheritance
// index); changing a profile's labels re-matches its endpoints.
func TestProfileLabelInheritance(t *testing.T) {
	ds := datastore{}
	ds.put(t, pool("v4", "10.65.0.0/16", false))
	ds.put(t, profile("front", map[string]string{"tier": "frontend", "zone": "a"}))
	ds.put(t, profile("back", map[string]string{"tier": "backend", "zone": "b"}))
	// x inherits tier=frontend; y overrides it; z lists two profiles.
	ds.put(t, wep("prod", "x", thisNode, "calix", nil, []string{"10.65.0.2/32"}, "front"))
	ds.put(t, wep("prod", "y", thisNode, "caliy", map[string]string{"tier": "db"}, []string{"10.65.0.3/32"}, "front"))
	ds.put(t, wep("prod", "z", thisNode, "caliz", nil, []string{"10.65.0.4/32"}, "back", "front"))
	ds.put(t, wep("prod", "r", "node2", "calir", nil, []string{"10.65.1.2/32"}, "front"))
	ds.put(t, gnp("fe", order(1), "tier == 'frontend'", "", allowFrom("zone == 'a'", ""), nil))
	known := []rules.PolicyKey{{Name: "fe"}}

	inc := calc.NewState(thisNode)
	applyAll(inc, diff(t, datastore{}, ds))
	inc.Apply(calc.Update{InSync: true})
	d := checkFresh(t, "initial", inc, ds)
	for iface, want := range map[string][]string{"calix": {"fe"}, "caliy": nil, "caliz": nil} {
		if got := policyJumps(d, 4, rules.DirIngress, iface, known); !slices.Equal(got, want) {
			t.Errorf("%s: policies %v, want %v", iface, got, want)
		}
	}
	if got, want := set(t, d, 4, "zone == 'a'", ""), []string{"10.65.0.2/32", "10.65.0.3/32", "10.65.1.2/32"}; !slices.Equal(got, want) {
		t.Errorf("zone == 'a' members %v, want %v (z's first profile 'back' gives zone=b)", got, want)
	}

	next := ds.clone()
	next.put(t, profile("front", map[string]string{"tier": "backend", "zone": "a"}))
	next.put(t, profile("back", map[string]string{"tier": "frontend", "zone": "a"}))
	applyAll(inc, diff(t, ds, next))
	d = checkFresh(t, "profile labels swapped", inc, next)
	for iface, want := range map[string][]string{"calix": nil, "caliy": nil, "caliz": {"fe"}} {
		if got := policyJumps(d, 4, rules.DirIngress, iface, known); !slices.Equal(got, want) {
			t.Errorf("after the change, %s: policies %v, want %v", iface, got, want)
		}
	}
	if got, want := set(t, d, 4, "zone == 'a'", ""), []string{"10.65.0.2/32", "10.65.0.3/32", "10.65.0.4/32", "10.65.1.2/32"}; !slices.Equal(got, want) {
		t.Errorf("zone == 'a' members %v, want %v", got, want)
	}

	last := next.clone()
	last.remove("Profile", "", "back")
	applyAll(inc, diff(t, next, last))
	d = checkFresh(t, "profile deleted", inc, last)
	if got := policyJumps(d, 4, rules.DirIngress, "caliz", known); len(got) != 0 {
		t.Errorf("caliz keeps policies %v after its profile went", got)
	}
}

// The scenario of the IP set test: endpoints, network sets and
// namespaces that rule selectors match, local and remote.
func ipsetBase(t *testing.T) datastore {
	ds := datastore{}
	ds.put(t, pool("v4", "10.65.0.0/16", true))
	ds.put(t, pool("v6", "fd00:65::/48", false))
	ds.put(t, profile("kns.prod", map[string]string{"pcns.env": "production"}))
	ds.put(t, profile("kns.dev", map[string]string{"pcns.env": "dev"}))
	ds.put(t, profile("kns.staging", map[string]string{"pcns.env": "staging"}))
	ds.put(t, profile("front", map[string]string{"tier": "frontend"}))
	ds.put(t, wep("prod", "web1", thisNode, "caliweb1", map[string]string{"app": "web", "role": "client"},
		[]string{"10.65.0.2/32", "fd00:65::2/128"}, "kns.prod", "front"))
	db1 := wep("prod", "db1", thisNode, "calidb1", map[string]string{"app": "db"}, []string{"10.65.0.3/32"}, "kns.prod")
	db1.Spec.Ports = []api.WorkloadEndpointPort{{Name: "pg", Protocol: api.ProtocolFromString("TCP"), Port: 5432}}
	ds.put(t, db1)
	ds.put(t, wep("dev", "web2", thisNode, "caliweb2", map[string]string{"app": "web", "role": "client"}, []string{"10.65.0.4/32"}, "kns.dev"))
	ds.put(t, wep("staging", "cli", "node2", "calicli", map[string]string{"role": "client"},
		[]string{"10.65.1.2/32", "fd00:65:1::2/128"}, "kns.staging"))
	db2 := wep("prod", "db2", "node2", "calidb2", map[string]string{"app": "db"}, []string{"10.65.1.3/32"}, "kns.prod")
	db2.Spec.Ports = []api.WorkloadEndpointPort{{Name: "pg", Protocol: api.ProtocolFromString("TCP"), Port: 5433}}
	ds.put(t, db2)
	ds.put(t, netset("", "office", map[string]string{"netset": "trusted"}, "192.168.10.0/24", "fd00:aa::/64"))
	ds.put(t, netset("staging", "partners", map[string]string{"netset": "trusted"}, "172.20.0.0/16"))
	ds.put(t, gnp("web-in", order(10), "app == 'web'", "", allowFrom("role == 'client'", ""), allowTo("tier == 'frontend'")))
	ds.put(t, gnp("from-staging", order(20), "all()", "env == 'production'", allowFrom("", "env == 'staging'"), nil))
	pg := api.ProtocolFromString("TCP")
	ds.put(t, gnp("trusted", order(30), "app == 'db'", "", []api.Rule{{Action: api.ActionAllow, Protocol: &pg,
		Source:      api.EntityRule{Selector: "netset == 'trusted'"},
		Destination: api.EntityRule{Ports: []api.Port{api.NamedPort("pg")}}}}, nil))
	ds.put(t, np("prod", "db-in", order(5), "app == 'db'", allowFrom("app == 'web'", ""), nil))
	return ds
}

// IP set members are kept up to date incrementally as endpoints, network
// sets, namespaces and profiles change; after every change the result must
// be what a state built from scratch from the same datastore computes.
func TestIPSetMembershipIncremental(t *testing.T) {
	const (
		clients  = "role == 'client'"
		front    = "tier == 'frontend'"
		trusted  = "netset == 'trusted'"
		staging  = "env == 'staging'"
		prodWebs = `app == "web" && projectcalico.org/namespace == "prod"`
	)
	type want struct {
		sel, nsSel string
		ver        int
		members    []string
	}
	steps := []struct {
		name   string
		change func(datastore)
		want   []want
	}{
		{"initial", func(datastore) {}, []want{
			{clients, "", 4, []string{"10.65.0.2/32", "10.65.0.4/32", "10.65.1.2/32"}},
			{clients, "", 6, []string{"fd00:65:1::2/128", "fd00:65::2/128"}},
			{front, "", 4, []string{"10.65.0.2/32"}},
			{trusted, "", 4, []string{"172.20.0.0/16", "192.168.10.0/24"}},
			{trusted, "", 6, []string{"fd00:aa::/64"}},
			{"all()", staging, 4, []string{"10.65.1.2/32", "172.20.0.0/16"}},
			{prodWebs, "", 4, []string{"10.65.0.2/32"}},
		}},
		{"endpoint label change", func(ds datastore) {
			ds.put(t, wep("dev", "web2", thisNode, "caliweb2", map[string]string{"app": "web"}, []string{"10.65.0.4/32"}, "kns.dev"))
			ds.put(t, wep("staging", "cli", "node2", "calicli", map[string]string{"role": "client", "tier": "frontend"},
				[]string{"10.65.1.2/32", "fd00:65:1::2/128"}, "kns.staging"))
		}, []want{
			{clients, "", 4, []string{"10.65.0.2/32", "10.65.1.2/32"}},
			{front, "", 4, []string{"10.65.0.2/32", "10.65.1.2/32"}},
		}},
		{"endpoint delete", func(ds datastore) {
			ds.remove("WorkloadEndpoint", "staging", "node2-k8s-cli-eth0")
			ds.remove("WorkloadEndpoint", "prod", "node2-k8s-db2-eth0")
		}, []want{
			{clients, "", 4, []string{"10.65.0.2/32"}},
			{clients, "", 6, []string{"fd00:65::2/128"}},
			{"all()", staging, 4, []string{"172.20.0.0/16"}},
		}},
		{"network set add", func(ds datastore) {
			ds.put(t, netset("", "vpn", map[string]string{"netset": "trusted"}, "10.99.0.0/16"))
			ds.put(t, netset("dev", "lab", map[string]string{"netset": "trusted"}, "172.21.0.0/16"))
			ds.put(t, netset("dev", "other", map[string]string{"netset": "other"}, "172.22.0.0/16"))
		}, []want{
			{trusted, "", 4, []string{"10.99.0.0/16", "172.20.0.0/16", "172.21.0.0/16", "192.168.10.0/24"}},
		}},
		{"namespace label change", func(ds datastore) {
			ds.put(t, profile("kns.dev", map[string]string{"pcns.env": "staging"}))
			ds.put(t, profile("kns.staging", map[string]string{"pcns.env": "retired"}))
		}, []want{
			// dev is now "staging": its endpoint and both its network sets
			// match; the old staging namespace's network set no longer does.
			{"all()", staging, 4, []string{"10.65.0.4/32", "172.21.0.0/16", "172.22.0.0/16"}},
		}},
		{"profile label change", func(ds datastore) {
			ds.put(t, profile("front", map[string]string{"tier": "backend"}))
		}, []want{
			{front, "", 4, nil},
		}},
		{"network set change and delete", func(ds datastore) {
			ds.put(t, netset("", "office", map[string]string{"netset": "trusted"}, "192.168.11.0/24"))
			ds.remove("NetworkSet", "dev", "lab")
		}, []want{
			{trusted, "", 4, []string{"10.99.0.0/16", "172.20.0.0/16", "192.168.11.0/24"}},
			{"all()", staging, 4, []string{"10.65.0.4/32", "172.22.0.0/16"}},
		}},
		{"endpoint moves off this node", func(ds datastore) {
			ds.put(t, wep("prod", "web1", "node2", "caliweb1", map[string]string{"app": "web", "role": "client"},
				[]string{"10.65.0.2/32", "fd00:65::2/128"}, "kns.prod", "front"))
		}, []want{
			{clients, "", 4, []string{"10.65.0.2/32"}},
		}},
		{"new endpoint", func(ds datastore) {
			ds.put(t, wep("dev", "new", thisNode, "calinew", map[string]string{"role": "client"}, []string{"10.65.0.9/32"}, "kns.dev"))
		}, []want{
			{clients, "", 4, []string{"10.65.0.2/32", "10.65.0.9/32"}},
			{"all()", staging, 4, []string{"10.65.0.4/32", "10.65.0.9/32", "172.22.0.0/16"}},
		}},
	}
	inc := calc.NewState(thisNode)
	prev := datastore{}
	cur := ipsetBase(t)
	for i, s := range steps {
		if i > 0 {
			cur = prev.clone()
		}
		s.change(cur)
		applyAll(inc, diff(t, prev, cur))
		if i == 0 {
			inc.Apply(calc.Update{InSync: true})
		}
		d := checkFresh(t, s.name, inc, cur)
		for _, w := range s.want {
			if got := set(t, d, w.ver, w.sel, w.nsSel); !slices.Equal(got, w.members) {
				t.Errorf("%s: v%d set %q ns %q = %v, want %v", s.name, w.ver, w.sel, w.nsSel, got, w.members)
			}
		}
		prev = cur
	}
}

// Named port sets hold address,proto:port of the matching endpoints.
func TestNamedPortSet(t *testing.T) {
	ds := ipsetBase(t)
	d := fresh(t, ds, 0).Desired(true)
	name := rules.IPSetName(4, rules.IPSetSpec{Kind: rules.IPSetNamedPort, Selector: "all()", PortName: "pg", Protocol: "tcp"})
	s, ok := d.IPSets[name]
	if !ok {
		t.Fatalf("no named port set %s among %v", name, keys(d.IPSets))
	}
	if want := []string{"10.65.0.3,tcp:5432", "10.65.1.3,tcp:5433"}; !slices.Equal(s.Members, want) || s.Type != "hash:ip,port" {
		t.Errorf("named port set %s %v, want hash:ip,port %v", s.Type, s.Members, want)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Blackhole routes are for the blocks affine to this node only, IPv6
// ones only when IPv6 is on, sorted; they follow block changes.
func TestBlackholesAffineBlocksOnly(t *testing.T) {
	ds := datastore{}
	ds.block(t, "10.65.0.64/26", thisNode)
	ds.block(t, "10.65.0.0/26", thisNode)
	ds.block(t, "10.65.0.128/26", "node2")
	ds.block(t, "10.65.0.192/26", "")
	ds.block(t, "fd00:65::/122", thisNode)
	ds.block(t, "fd00:65::40/122", "node10") // "host:node10" is not "host:node1"
	inc := calc.NewState(thisNode)
	applyAll(inc, diff(t, datastore{}, ds))
	inc.Apply(calc.Update{InSync: true})
	check := func(step string, d calc.Desired, want ...string) {
		t.Helper()
		var got []string
		for _, p := range d.Blackholes {
			got = append(got, p.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: blackholes %v, want %v", step, got, want)
		}
	}
	check("v4 only", inc.Desired(false), "10.65.0.0/26", "10.65.0.64/26")
	check("dual stack", checkFresh(t, "dual stack", inc, ds), "10.65.0.0/26", "10.65.0.64/26", "fd00:65::/122")

	next := ds.clone()
	delete(next, etcdv3.BlockKey(netip.MustParsePrefix("10.65.0.64/26")))
	next.block(t, "10.65.0.128/26", thisNode) // affinity moved here
	next.block(t, "10.65.0.0/26", "node2")    // and away
	applyAll(inc, diff(t, ds, next))
	check("after changes", checkFresh(t, "after changes", inc, next), "10.65.0.128/26", "fd00:65::/122")
}

// The calculation is deterministic: the same datastore gives identical
// output (tables, sets, endpoints) whatever the order updates arrived in,
// and asking twice gives the same answer.
func TestDesiredDeterministic(t *testing.T) {
	ds := ipsetBase(t)
	ds.block(t, "10.65.0.0/26", thisNode)
	ds.block(t, "fd00:65::/122", thisNode)
	want := fresh(t, ds, 0).Desired(true)
	for seed := int64(1); seed <= 20; seed++ {
		s := fresh(t, ds, seed)
		for i := 0; i < 2; i++ {
			got := s.Desired(true)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, call %d: result differs:\n%s", seed, i, textDiff(dump(got), dump(want)))
			}
		}
	}
}

// FelixConfiguration "default" overlaid by "node.<name>" shapes the
// rendered chains; deleting them restores the defaults.
func TestFelixConfigurationLifecycle(t *testing.T) {
	ds := ipsetBase(t)
	inc := calc.NewState(thisNode)
	applyAll(inc, diff(t, datastore{}, ds))
	inc.Apply(calc.Update{InSync: true})
	base := dump(checkFresh(t, "no configuration", inc, ds))

	next := ds.clone()
	def := newObj("FelixConfiguration").(*api.FelixConfiguration)
	def.Metadata.Name = "default"
	def.Spec.DefaultEndpointToHostAction = "Accept"
	def.Spec.IPForwarding = "Disabled"
	next.put(t, def)
	nodeCfg := newObj("FelixConfiguration").(*api.FelixConfiguration)
	nodeCfg.Metadata.Name = "node." + thisNode
	nodeCfg.Spec.DefaultEndpointToHostAction = "Return" // the node's own configuration wins
	nodeCfg.Spec.FailsafeInboundHostPorts = &[]api.ProtoPort{{Protocol: "TCP", Port: 2222}}
	next.put(t, nodeCfg)
	applyAll(inc, diff(t, ds, next))
	d := checkFresh(t, "configured", inc, next)
	if got := dump(d); got == base {
		t.Fatal("configuration changed nothing")
	}
	if !hasRule(d, "cali-wl-to-host", "-j RETURN") || hasRule(d, "cali-wl-to-host", "-j ACCEPT") {
		t.Errorf("configuration not rendered (node.<name> over default):\n%s", dump(d))
	}
	if d.IPForwarding != "Disabled" {
		t.Errorf("IPForwarding %q, want default's Disabled", d.IPForwarding)
	}
	// Failsafe ports only matter with host endpoints, which are not policed here.
	if hasRule(d, "cali-failsafe-in", "--dport 2222") {
		t.Errorf("failsafe chain rendered without host endpoints")
	}

	applyAll(inc, diff(t, next, ds))
	if d := checkFresh(t, "configuration deleted", inc, ds); d.IPForwarding != "" {
		t.Errorf("IPForwarding %q after the configuration went, want the default (empty)", d.IPForwarding)
	}
	if got := dump(checkFresh(t, "configuration deleted", inc, ds)); got != base {
		t.Errorf("after deleting the configuration the result is not the default one:\n%s", textDiff(got, base))
	}
}

func hasRule(d calc.Desired, chain, text string) bool {
	for _, c := range d.Tables[4].Filter {
		if c.Name != chain {
			continue
		}
		for _, r := range c.Rules {
			if strings.Contains(r.Match+" "+r.Action, text) {
				return true
			}
		}
	}
	return false
}
