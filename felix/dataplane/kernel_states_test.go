package dataplane

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// dpState is one whole datastore content plus the BGP routes of the moment.
type dpState struct {
	name string
	ds   datastore
	bgp  map[netip.Prefix]RouteTarget
}

func newObj(kind string) api.Resource {
	k, ok := api.LookupKind(kind)
	if !ok {
		panic(kind)
	}
	return k.NewObject()
}

func wep(ns, pod, iface, mac string, labels map[string]string, ips ...string) *api.WorkloadEndpoint {
	w := newObj("WorkloadEndpoint").(*api.WorkloadEndpoint)
	w.Metadata.Namespace, w.Metadata.Name, w.Metadata.Labels = ns, thisNode+"-k8s-"+pod+"-eth0", labels
	w.Spec = api.WorkloadEndpointSpec{Orchestrator: "k8s", Node: thisNode, Pod: pod, Endpoint: "eth0",
		InterfaceName: iface, MAC: mac, IPNetworks: ips, Profiles: []string{"kns." + ns}}
	return w
}

func gnp(name string, order float64, sel string, ingress, egress []api.Rule) *api.GlobalNetworkPolicy {
	p := newObj("GlobalNetworkPolicy").(*api.GlobalNetworkPolicy)
	p.Metadata.Name = name
	p.Spec = api.GlobalNetworkPolicySpec{Order: &order, Selector: sel, Ingress: ingress, Egress: egress}
	return p
}

func profile(name string, labels map[string]string) *api.Profile {
	p := newObj("Profile").(*api.Profile)
	p.Metadata.Name, p.Spec.LabelsToApply = name, labels
	p.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: "has(app)"}}}
	p.Spec.Egress = []api.Rule{{Action: api.ActionAllow}}
	return p
}

func ippool(name, cidr string, natOutgoing bool) *api.IPPool {
	p := newObj("IPPool").(*api.IPPool)
	p.Metadata.Name, p.Spec.CIDR, p.Spec.NATOutgoing = name, cidr, natOutgoing
	return p
}

func netset(name string, labels map[string]string, nets ...string) *api.GlobalNetworkSet {
	s := newObj("GlobalNetworkSet").(*api.GlobalNetworkSet)
	s.Metadata.Name, s.Metadata.Labels, s.Spec.Nets = name, labels, nets
	return s
}

func from(sel string) []api.Rule {
	return []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: sel}}}
}

func fromNamespaces(nsSel string) []api.Rule {
	return []api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{NamespaceSelector: nsSel}}}
}

func via(gws ...string) RouteTarget {
	var t RouteTarget
	for _, g := range gws {
		t.Via = append(t.Via, netip.MustParseAddr(g))
	}
	return t
}

// testStates are six node states, each a whole datastore content: they
// add, change and remove endpoints (addresses, MACs, labels), policies,
// profiles, network sets, pools, blocks, Felix configuration and BGP
// routes, so every transition between two of them exercises updates and
// removals of every kind of kernel object the dataplane owns.
func testStates(t *testing.T) []dpState {
	tcp := api.ProtocolFromString("TCP")
	base := func() datastore {
		ds := datastore{}
		ds.put(t, ippool("v4", "10.65.0.0/16", true))
		ds.put(t, ippool("v6", "fd00:65::/48", false))
		ds.put(t, profile("kns.prod", map[string]string{"pcns.env": "production"}))
		ds.put(t, profile("kns.dev", map[string]string{"pcns.env": "dev"}))
		ds.block(t, "10.65.0.0/26")
		return ds
	}
	web := wep("prod", "web", "calitest1", "ee:ee:ee:00:00:01", map[string]string{"app": "web"}, "10.65.0.2/32", "fd00:65::2/128")
	db := wep("prod", "db", "calitest2", "ee:ee:ee:00:00:02", map[string]string{"app": "db"}, "10.65.0.3/32")
	db.Spec.Ports = []api.WorkloadEndpointPort{{Name: "pg", Protocol: tcp, Port: 5432}}
	cli := wep("dev", "cli", "calitest3", "ee:ee:ee:00:00:03", map[string]string{"role": "client"}, "10.65.0.4/32", "fd00:65::4/128")
	cli.Spec.IPNATs = []api.IPNAT{{InternalIP: "10.65.0.4", ExternalIP: "172.16.5.4"}}
	dbIn := newObj("NetworkPolicy").(*api.NetworkPolicy)
	dbIn.Metadata.Namespace, dbIn.Metadata.Name = "prod", "db-in"
	dbIn.Spec.Selector = "app == 'db'"
	dbIn.Spec.Ingress = []api.Rule{{Action: api.ActionAllow, Protocol: &tcp, Source: api.EntityRule{Selector: "app == 'web'"},
		Destination: api.EntityRule{Ports: []api.Port{api.NamedPort("pg")}}}}

	var states []dpState
	add := func(name string, ds datastore, bgp map[netip.Prefix]RouteTarget) {
		states = append(states, dpState{name: name, ds: ds, bgp: bgp})
	}

	add("pools and a block", base(), nil)

	ds := base()
	ds.block(t, "fd00:65::/122")
	ds.put(t, web)
	ds.put(t, db)
	ds.put(t, gnp("allow-web", 10, "app == 'web'", from("role == 'client'"), nil))
	add("two pods", ds, map[netip.Prefix]RouteTarget{netip.MustParsePrefix("10.65.1.0/26"): via("172.30.0.2")})

	ds = base()
	ds.block(t, "fd00:65::/122")
	ds.put(t, web)
	ds.put(t, db)
	ds.put(t, cli)
	ds.put(t, dbIn)
	ds.put(t, gnp("allow-web", 10, "app == 'web'", from("role == 'client'"), nil))
	ds.put(t, gnp("trusted", 5, "all()", from("netset == 'trusted'"), nil))
	ds.put(t, netset("office", map[string]string{"netset": "trusted"}, "192.168.10.0/24", "fd00:aa::/64"))
	add("policies and network sets", ds, map[netip.Prefix]RouteTarget{
		netip.MustParsePrefix("10.65.1.0/26"):    via("172.30.0.2"),
		netip.MustParsePrefix("fd00:65:1::/122"): via("fd00:30::2"),
	})

	ds = base()
	ds.block(t, "fd00:65::/122")
	ds.put(t, profile("kns.dev", map[string]string{"pcns.env": "production"}))
	ds.put(t, wep("prod", "web", "calitest1", "ee:ee:ee:00:00:01", map[string]string{"app": "web", "role": "client"}, "10.65.0.2/32", "fd00:65::2/128"))
	ds.put(t, db)
	ds.put(t, cli)
	ds.put(t, dbIn)
	ds.put(t, gnp("allow-web", 1, "app == 'web'", from("role == 'client'"), fromNamespaces("env == 'production'")))
	ds.put(t, gnp("trusted", 5, "all()", from("netset == 'trusted'"), nil))
	ds.put(t, netset("office", map[string]string{"netset": "trusted"}, "192.168.10.0/24", "192.168.20.0/24", "fd00:aa::/64"))
	fc := newObj("FelixConfiguration").(*api.FelixConfiguration)
	fc.Metadata.Name = "default"
	fc.Spec.DefaultEndpointToHostAction = "Accept"
	fc.Spec.FailsafeInboundHostPorts = &[]api.ProtoPort{{Protocol: "TCP", Port: 22}, {Protocol: "TCP", Port: 2222}}
	enabled := "Enabled" // cli's floating IP is programmed from here on
	fc.Spec.FloatingIPs = &enabled
	ds.put(t, fc)
	add("labels, order and configuration changed", ds, map[netip.Prefix]RouteTarget{
		netip.MustParsePrefix("10.65.1.0/26"):    via("172.30.0.2", "172.30.0.3"),
		netip.MustParsePrefix("fd00:65:1::/122"): via("fd00:30::2"),
	})

	ds = base()
	ds.put(t, ippool("v4", "10.65.0.0/16", false))
	ds.put(t, wep("prod", "db", "calitest2", "ee:ee:ee:00:00:22", map[string]string{"app": "db"}, "10.65.0.5/32"))
	ds.put(t, wep("prod", "new", "calitest4", "ee:ee:ee:00:00:04", map[string]string{"app": "web"}, "10.65.0.6/32", "fd00:65::6/128"))
	ds.put(t, gnp("allow-web", 1, "app == 'web'", from("role == 'client'"), nil))
	add("pods removed, moved and renumbered", ds, nil)

	ds = base()
	ds.block(t, "10.65.0.64/26")
	ds.block(t, "fd00:65::40/122")
	for i := 1; i <= 4; i++ {
		app := []string{"web", "db"}[i%2]
		ds.put(t, wep("prod", fmt.Sprintf("p%d", i), fmt.Sprintf("calitest%d", i), fmt.Sprintf("ee:ee:ee:00:01:%02x", i),
			map[string]string{"app": app, "role": "client"}, fmt.Sprintf("10.65.0.%d/32", 10+i), fmt.Sprintf("fd00:65::%x/128", 16+i)))
	}
	var nets []string
	for i := 0; i < 300; i++ {
		nets = append(nets, fmt.Sprintf("10.%d.%d.0/24", 100+i/200, i%200))
	}
	ds.put(t, netset("big", map[string]string{"netset": "trusted"}, nets...))
	ds.put(t, gnp("trusted", 5, "all()", from("netset == 'trusted'"), nil)) // the same set as before, now large
	for i := 0; i < 20; i++ {
		ds.put(t, gnp(fmt.Sprintf("many-%02d", i), float64(i), []string{"app == 'web'", "app == 'db'", "all()"}[i%3],
			from(fmt.Sprintf("netset == 'trusted' || tier == 't%d'", i%4)), from("role == 'client'")))
	}
	add("many policies and a large set", ds, map[netip.Prefix]RouteTarget{
		netip.MustParsePrefix("10.65.1.0/26"):    via("172.30.0.3"),
		netip.MustParsePrefix("10.65.2.0/26"):    via("172.30.0.2", "172.30.0.3"),
		netip.MustParsePrefix("fd00:65:2::/122"): via("fd00:30::2", "fd00:30::3"),
	})
	return states
}

// State-sequence test: the kernel state reached after any sequence of
// datastore states is the one a fresh node reaches from the last state
// alone; states are applied in order, in reverse and in three seeded
// random orders, each in a fresh namespace, and compared after every step.
func TestDataplaneStateSequence(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	states := testStates(t)

	// What a fresh node reaches from each state alone.
	want := make([]string, len(states))
	for i, st := range states {
		nd := newNode(t, newKernelNS(t, tools))
		nd.to(st)
		want[i] = kernelText(t, nd.ns, tools, nd.ifaces())
		if i > 0 && want[i] == want[i-1] {
			t.Fatalf("states %q and %q render the same kernel state", states[i-1].name, st.name)
		}
	}
	if testing.Verbose() {
		t.Logf("kernel state of %q:\n%s", states[len(states)-1].name, want[len(want)-1])
	}

	orders := map[string][]int{"forward": {}, "reverse": {}}
	for i := range states {
		orders["forward"] = append(orders["forward"], i)
		orders["reverse"] = append(orders["reverse"], len(states)-1-i)
	}
	for seed := int64(1); seed <= 3; seed++ {
		// Random walks that revisit states: every state twice, shuffled.
		var walk []int
		for i := range states {
			walk = append(walk, i, i)
		}
		rand.New(rand.NewSource(seed)).Shuffle(len(walk), func(i, j int) { walk[i], walk[j] = walk[j], walk[i] })
		orders[fmt.Sprintf("random-%d", seed)] = walk
	}
	for _, name := range []string{"forward", "reverse", "random-1", "random-2", "random-3"} {
		t.Run(name, func(t *testing.T) {
			nd := newNode(t, newKernelNS(t, tools))
			var path []string
			for _, i := range orders[name] {
				nd.t = t
				nd.to(states[i])
				path = append(path, states[i].name)
				if got := kernelText(t, nd.ns, tools, nd.ifaces()); got != want[i] {
					t.Fatalf("after %s: kernel differs from a fresh node's in %q; + here only, - fresh only:\n%s",
						strings.Join(path, " -> "), states[i].name, lineDiff(got, want[i]))
				}
				// Applying the same desired state again changes nothing and
				// runs no command: the drivers' caches are valid.
				tools.calls(t)
				nd.apply()
				if calls := tools.calls(t); len(calls) > 0 {
					t.Errorf("after %s: a second Apply of the same state ran %v", strings.Join(path, " -> "), calls)
				}
			}
		})
	}
}

// Drift made by others is repaired by Resync + Apply: rules, a chain's
// rules, our hook, set members, routes, a blackhole, a host veth sysctl
// and neighbours removed
// by hand come back; a rule, a set member and a route added by hand where
// we own the object go. What is not ours (a
// rule in a built-in chain, a chain, a set, a route of another protocol)
// stays.
func TestDataplaneRepairsDrift(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	states := testStates(t)
	nd := newNode(t, newKernelNS(t, tools))
	nd.to(states[3])
	want := kernelText(t, nd.ns, tools, nd.ifaces())
	var setName string
	for name, s := range nd.des.IPSets {
		if slices.Contains(s.Members, "192.168.20.0/24") {
			setName = name
		}
	}
	if setName == "" {
		t.Fatal("no set holds the office network")
	}
	ip, ipset := tools.real["ip"], tools.real["ipset"]
	foreign := [][]string{
		{"iptables", "-A", "FORWARD", "-s", "203.0.113.0/24", "-j", "ACCEPT"},
		{"iptables", "-N", "other-chain"},
		{ipset, "create", "other-set", "hash:net"},
		{ip, "route", "add", "203.0.113.0/24", "via", "172.30.0.9", "proto", "static"},
	}
	drift := [][]string{
		{"iptables", "-D", "cali-FORWARD", "2"},
		{"iptables", "-F", "cali-tw-calitest2"},
		{"iptables", "-I", "cali-tw-calitest3", "1", "-j", "ACCEPT"},
		{"ip6tables", "-D", "cali-from-wl-dispatch", "1"},
		{"iptables", "-D", "FORWARD", "1"}, // our hook
		{ipset, "del", setName, "192.168.20.0/24"},
		{ipset, "add", setName, "10.9.9.0/24"},
		{ip, "route", "del", "10.65.0.3/32", "dev", "calitest2"},
		{ip, "route", "del", "blackhole", "10.65.0.0/26"},
		{ip, "-6", "route", "del", "fd00:65::2/128", "dev", "calitest1"},
		{ip, "route", "del", "10.65.1.0/26"},
		{ip, "route", "add", "10.65.0.77/32", "dev", "calitest2", "proto", "80"},
		{ip, "neigh", "del", "10.65.0.4", "dev", "calitest3"},
		{"sh", "-c", "echo 0 > /proc/sys/net/ipv4/conf/calitest2/proxy_arp"}, // a host veth sysctl
	}
	for _, d := range append(foreign, drift...) {
		run(t, nd.ns, d[0], d[1:]...)
	}
	if got := kernelText(t, nd.ns, tools, nd.ifaces()); got == want {
		t.Fatal("the drift changed nothing the test renders")
	}
	nd.dp.Resync()
	nd.apply()
	if got := kernelText(t, nd.ns, tools, nd.ifaces()); got != want {
		t.Errorf("drift not repaired; + here only, - wanted only:\n%s", lineDiff(got, want))
	}
	for _, check := range []struct{ out, want string }{
		{run(t, nd.ns, tools.real["iptables-save"], "-t", "filter"), "-A FORWARD -s 203.0.113.0/24 -j ACCEPT"},
		{run(t, nd.ns, tools.real["iptables-save"], "-t", "filter"), ":other-chain"},
		{run(t, nd.ns, ipset, "list", "-n"), "other-set"},
		{run(t, nd.ns, ip, "route", "show", "proto", "static"), "203.0.113.0/24 via 172.30.0.9"},
	} {
		if !strings.Contains(check.out, check.want) {
			t.Errorf("foreign state %q went:\n%s", check.want, check.out)
		}
	}
}

// Permanent neighbours are exactly those of the current endpoints: an
// endpoint that goes (its interface may stay), an address that changes
// and a permanent entry added by hand on a cali* interface leave none
// behind.
func TestDataplaneRemovesStaleNeighbours(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	states := testStates(t)
	nd := newNode(t, newKernelNS(t, tools))
	neighbours := func() string {
		var out []string
		for _, l := range strings.Split(run(t, nd.ns, tools.real["ip"], "neigh", "show", "nud", "permanent"), "\n") {
			if f := strings.Fields(l); len(f) >= 5 && strings.HasPrefix(f[2], "cali") {
				out = append(out, f[0]+"@"+f[2]+"="+f[4])
			}
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	nd.to(states[1]) // web on calitest1, db on calitest2
	if got, want := neighbours(), "10.65.0.2@calitest1=ee:ee:ee:00:00:01 10.65.0.3@calitest2=ee:ee:ee:00:00:02 fd00:65::2@calitest1=ee:ee:ee:00:00:01"; got != want {
		t.Fatalf("neighbours %s, want %s", got, want)
	}
	nd.to(states[4]) // web gone, db renumbered with a new MAC, new pod on calitest4
	want := "10.65.0.5@calitest2=ee:ee:ee:00:00:22 10.65.0.6@calitest4=ee:ee:ee:00:00:04 fd00:65::6@calitest4=ee:ee:ee:00:00:04"
	if got := neighbours(); got != want {
		t.Errorf("after endpoints went and changed: neighbours %s, want %s", got, want)
	}
	for _, dev := range []string{"calitest3", "calitest4"} {
		run(t, nd.ns, tools.real["ip"], "neigh", "add", "10.65.0.99", "lladdr", "ee:ee:ee:00:00:99", "dev", dev, "nud", "permanent")
	}
	nd.dp.Resync()
	nd.apply()
	if got := neighbours(); got != want {
		t.Errorf("after entries added by hand and a resync: neighbours %s, want %s", got, want)
	}
}

// The kernel's own routes on workload interfaces (the IPv6 link-local
// prefix route every interface gets) are not foreign routes to remove,
// however long they have been seen.
func TestDataplaneKeepsKernelRoutesOnWorkloadInterfaces(t *testing.T) {
	needKernel(t)
	tools := wrapTools(t)
	n := newKernelNS(t, tools)
	nd := newNode(t, n)
	nd.dp = New(Config{IPv6: true, RouteGracePeriod: time.Millisecond})
	linkLocal := func() string {
		var out []string
		for i := 1; i <= 4; i++ {
			dev := fmt.Sprintf("calitest%d", i)
			if strings.Contains(run(t, n, tools.real["ip"], "-6", "route", "show", "dev", dev), "fe80::/64") {
				out = append(out, dev)
			}
		}
		return strings.Join(out, " ")
	}
	before := linkLocal()
	if before != "calitest1 calitest2 calitest3 calitest4" {
		t.Fatalf("link-local routes to start with on: %q", before)
	}
	nd.to(testStates(t)[1])
	for i := 0; i < 5; i++ { // past the grace period, several times
		time.Sleep(5 * time.Millisecond)
		nd.dp.Resync()
		nd.apply()
	}
	if after := linkLocal(); after != before {
		t.Errorf("the dataplane removed the kernel's link-local routes: left on %q of %q", after, before)
	}
}

// lineDiff shows the lines only one side has (with multiplicity).
func lineDiff(got, want string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	var plus, minus []string
	for _, l := range strings.Split(got, "\n") {
		if count[l] > 0 {
			count[l]--
			continue
		}
		plus = append(plus, "+ "+l)
	}
	for _, l := range strings.Split(want, "\n") {
		if count[l] > 0 {
			count[l]--
			minus = append(minus, "- "+l)
		}
	}
	if len(plus)+len(minus) == 0 {
		return "(same lines in another order)"
	}
	return strings.Join(append(plus, minus...), "\n")
}
