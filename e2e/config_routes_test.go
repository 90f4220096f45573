package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/store/api"
)

// routeLine is the host's route to a pod address (IPv4 or IPv6), as ip
// shows it.
func (e *cniEnv) routeLine(addr string) string {
	fam := "-4"
	if strings.Contains(addr, ":") {
		fam = "-6"
	}
	return strings.TrimSpace(mustNS(e.t, e.host.ns, "ip", fam, "route", "show", addr))
}

// waitRoute waits until the route to addr satisfies ok (given its fields).
func (e *cniEnv) waitRoute(what, addr string, ok func(fields []string) bool) {
	e.t.Helper()
	eventually(e.t, 20*time.Second, what, func() error {
		line := e.routeLine(addr)
		if line == "" || !ok(strings.Fields(line)) {
			return fmt.Errorf("route to %s: %q", addr, line)
		}
		return nil
	})
}

// after is the field after key in fields ("" when absent).
func after(fields []string, key string) string {
	for i := range fields[:max(len(fields)-1, 0)] {
		if fields[i] == key {
			return fields[i+1]
		}
	}
	return ""
}

// TestConfigDeviceRouteSourceLive: the routes to a dual-stack pod have no
// src; deviceRouteSourceAddress and deviceRouteSourceAddressIPv6 written
// while the agent runs give the /32 and the /128 that src, and removing
// them takes it away again.
func TestConfigDeviceRouteSourceLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 211)
	mustNS(t, e.host.ns, "ip", "-6", "addr", "add", "fd31:211::1/64", "dev", "uplink", "nodad")
	e.pool("v4", "10.211.0.0/24")
	e.pool("v6", "fd00:211::/120")
	l := e.conflist("1.0.0", "srcnet", e.calicoPlugin("node1", `,"assign_ipv6":"true"`))
	e.startAgent("node1")
	p := e.newPod(l, "src1")
	if p.ip == "" || p.ip6 == "" {
		t.Fatalf("pod addresses %q %q: want both families", p.ip, p.ip6)
	}
	src := func(want string) func([]string) bool {
		return func(f []string) bool { return after(f, "src") == want && strings.HasPrefix(after(f, "dev"), "cali") }
	}
	e.waitRoute("IPv4 route, no src", p.ip, src(""))
	e.waitRoute("IPv6 route, no src", p.ip6, src(""))
	e.felixDefault(func(s *api.FelixConfigurationSpec) {
		s.DeviceRouteSourceAddress, s.DeviceRouteSourceAddressIPv6 = e.host.hostIP, "fd31:211::1"
	})
	e.waitRoute("IPv4 route gets src "+e.host.hostIP, p.ip, src(e.host.hostIP))
	e.waitRoute("IPv6 route gets src fd31:211::1", p.ip6, src("fd31:211::1"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.DeviceRouteSourceAddress = "" })
	e.waitRoute("IPv4 route loses its src", p.ip, src(""))
	e.waitRoute("IPv6 route keeps its src", p.ip6, src("fd31:211::1"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.DeviceRouteSourceAddressIPv6 = "" })
	e.waitRoute("IPv6 route loses its src", p.ip6, src(""))
	if line := e.routeLine(p.ip); after(strings.Fields(line), "proto") != "80" {
		t.Errorf("route %q: want the agent's protocol 80", line)
	}
}

// TestConfigDeviceRouteProtocolLive: a pod's route carries the agent's
// protocol 80; deviceRouteProtocol written while the agent runs
// reprograms it with 77, then 3 (boot, Calico's default); the agent still
// knows the route as its own (removing the endpoint removes it), and a
// route of someone else's with the same numbers on the uplink stays.
func TestConfigDeviceRouteProtocolLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 212)
	e.pool("p", "10.212.0.0/24")
	l := e.conflist("1.0.0", "protonet", e.calicoPlugin("node1", ""))
	e.startAgent("node1")
	a, b := e.newPod(l, "pa"), e.newPod(l, "pb")
	mustNS(t, e.host.ns, "ip", "route", "add", "192.0.2.1/32", "dev", "uplink", "proto", "77")
	mustNS(t, e.host.ns, "ip", "route", "add", "192.0.2.2/32", "dev", "uplink", "proto", "boot")
	proto := func(want string) func([]string) bool {
		return func(f []string) bool { return after(f, "proto") == want && strings.HasPrefix(after(f, "dev"), "cali") }
	}
	e.waitRoute("route with the agent's protocol", a.ip, proto("80"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { p := 77; s.DeviceRouteProtocol = &p })
	e.waitRoute("route with protocol 77", a.ip, proto("77"))
	e.waitRoute("route with protocol 77", b.ip, proto("77"))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { p := 3; s.DeviceRouteProtocol = &p })
	e.waitRoute("route with protocol boot (ip shows none)", a.ip, proto(""))
	ep := e.endpointOf(b)
	e.remove("WorkloadEndpoint", ep.Metadata.Namespace, ep.Metadata.Name)
	eventually(t, 20*time.Second, "the removed endpoint's route goes", func() error {
		if line := e.routeLine(b.ip); line != "" {
			return fmt.Errorf("route still there: %q", line)
		}
		return nil
	})
	for _, dst := range []string{"192.0.2.1", "192.0.2.2"} {
		if e.routeLine(dst) == "" {
			t.Errorf("someone else's route to %s on the uplink was removed", dst)
		}
	}
	e.waitRoute("the other pod keeps its route", a.ip, proto(""))
}

// tapWorkload makes a VM-like workload the CNI plugin did not wire: a
// veth whose host side is iface (not cali*) and whose other side, eth0 in
// a new namespace, has addr/32 and a default route via 169.254.1.1 (which
// the host answers by proxy ARP once the agent set its sysctls); and its
// WorkloadEndpoint, labelled role=vm.
func (e *cniEnv) tapWorkload(iface, addr string) {
	e.t.Helper()
	vm := newNS(e.t)
	mustNS(e.t, e.host.ns, "ip", "link", "add", iface, "type", "veth", "peer", "name", "eth0", "netns", nsName(vm))
	mustNS(e.t, e.host.ns, "ip", "link", "set", iface, "up")
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"link", "set", "eth0", "up"}, {"addr", "add", addr + "/32", "dev", "eth0"},
		{"route", "add", "169.254.1.1", "dev", "eth0", "scope", "link"}, {"route", "add", "default", "via", "169.254.1.1", "dev", "eth0"}} {
		mustNS(e.t, vm, "ip", args...)
	}
	k, _ := api.LookupKind("WorkloadEndpoint")
	w := k.NewObject().(*api.WorkloadEndpoint)
	w.Metadata.Namespace, w.Metadata.Name = "default", "node1-openstack-vm1-eth0"
	w.Metadata.Labels = map[string]string{"role": "vm"}
	w.Spec = api.WorkloadEndpointSpec{Orchestrator: "openstack", Workload: "vm1", Node: "node1", Endpoint: "eth0",
		InterfaceName: iface, IPNetworks: []string{addr + "/32"}}
	e.apply(w)
}

// TestConfigInterfacePrefixLive: a workload endpoint on a "tap" interface
// is ignored while interfacePrefix is Calico's default (cali): no route,
// no sysctls, no policy. interfacePrefix "cali,tap" written while the
// agent runs gives it its route and sysctls, and its policy (a pod reaches
// it while a policy allows it, not once a deny comes first); back to
// "cali" its route and policy chains go, and the pods keep theirs.
func TestConfigInterfacePrefixLive(t *testing.T) {
	t.Parallel()
	e := newCNIEnv(t, 213)
	e.pool("p", "10.213.0.0/24")
	l := e.conflist("1.0.0", "tapnet", e.calicoPlugin("node1", ""))
	e.startAgent("node1")
	a := e.newPod(l, "ta")
	const tap, vmIP = "tapvm0213", "10.213.0.200"
	e.tapWorkload(tap, vmIP)
	e.apply(gnp("allow-vm", 10, "role == 'vm'", []api.Rule{{Action: api.ActionAllow}}, []api.Rule{{Action: api.ActionAllow}}))
	proxyARP := func() string {
		return strings.TrimSpace(mustNS(t, e.host.ns, "sysctl", "-n", "net.ipv4.conf."+tap+".proxy_arp"))
	}
	tapChains := func() bool {
		return strings.Contains(mustNS(t, e.host.ns, "iptables-save", "-t", "filter"), "cali-tw-"+tap)
	}
	e.waitRoute("the pod's route", a.ip, func(f []string) bool { return strings.HasPrefix(after(f, "dev"), "cali") })
	time.Sleep(2 * time.Second) // several applies: the tap endpoint must stay ignored
	if line := e.routeLine(vmIP); line != "" {
		t.Fatalf("interfacePrefix cali: route to the tap workload %q", line)
	}
	if proxyARP() != "0" || tapChains() {
		t.Fatalf("interfacePrefix cali: tap workload got sysctls (proxy_arp %s) or policy chains (%v)", proxyARP(), tapChains())
	}

	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.InterfacePrefix = "cali,tap" })
	e.waitRoute("route to the tap workload", vmIP, func(f []string) bool { return after(f, "dev") == tap })
	eventually(t, 20*time.Second, "the tap workload's sysctls", func() error {
		if v := proxyARP(); v != "1" {
			return fmt.Errorf("proxy_arp %s", v)
		}
		return nil
	})
	if !strings.Contains(mustNS(t, e.host.ns, "iptables", "-S", "cali-FORWARD"), "-i tap+") {
		t.Fatalf("cali-FORWARD has no -i tap+ jump:\n%s", mustNS(t, e.host.ns, "iptables", "-S", "cali-FORWARD"))
	}
	eventually(t, 20*time.Second, "the pod reaches the tap workload (policy allows)", reachable(a.ns, vmIP))
	deny := gnp("deny-vm", 5, "role == 'vm'", []api.Rule{{Action: api.ActionDeny}}, nil)
	e.apply(deny)
	eventually(t, 20*time.Second, "a deny policy stops it", unreachable(a.ns, vmIP))
	e.remove("GlobalNetworkPolicy", "", "deny-vm")
	eventually(t, 20*time.Second, "reachable again", reachable(a.ns, vmIP))

	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.InterfacePrefix = "cali" })
	eventually(t, 20*time.Second, "tap's route and policy chains go", func() error {
		if line := e.routeLine(vmIP); line != "" || tapChains() {
			return fmt.Errorf("route %q, policy chains %v", line, tapChains())
		}
		return nil
	})
	e.waitRoute("the pod keeps its route", a.ip, func(f []string) bool { return strings.HasPrefix(after(f, "dev"), "cali") })
}

// TestConfigInterfaceExcludeLive: a "*" host endpoint polices the uplink
// (Calico's default interfaceExclude, kube-ipvs0, does not name it);
// interfaceExclude naming the uplink, then a /regexp/ matching it,
// written while the agent runs, leave it unpoliced; a host endpoint
// naming an excluded interface does not apply; back to the default the
// uplink is policed again.
func TestConfigInterfaceExcludeLive(t *testing.T) {
	t.Parallel()
	e, _ := hostEnvWith(t, 214, "10.214.0.0/24", hostEndpoint("all", "node1", "*"))
	outside := func() error { return tcpProbe(e.host.outside, hostPort(e.host.hostIP, 8080))() }
	expectTraffic(t, "* host endpoint, default interfaceExclude: the uplink is policed", deny("outside->host:8080", outside))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.InterfaceExclude = "kube-ipvs0,uplink" })
	expectTraffic(t, "interfaceExclude names the uplink", allow("outside->host:8080", outside))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.InterfaceExclude = "/^up/" })
	expectTraffic(t, "interfaceExclude /^up/", allow("outside->host:8080", outside))
	if got := mustNS(t, e.host.ns, "iptables", "-S", "cali-from-host-endpoint"); !strings.Contains(got, "-i uplink -m comment") {
		t.Errorf("no RETURN for the excluded uplink:\n%s", got)
	}
	e.remove("HostEndpoint", "", "all")
	e.apply(hostEndpoint("named", "node1", "uplink"))
	time.Sleep(2 * time.Second) // several applies: the named host endpoint must stay inactive
	expectTraffic(t, "a host endpoint naming an excluded interface does not apply", allow("outside->host:8080", outside))
	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.InterfaceExclude = "" })
	expectTraffic(t, "default interfaceExclude: the named host endpoint applies", deny("outside->host:8080", outside))
}

// TestConfigRouteSourceLive: over VXLAN, node1 routes node2's block
// (routeSource CalicoIPAM, Calico's default); routeSource WorkloadIPs
// written while the agents run replaces that with a /32 to node2's pod,
// and back to CalicoIPAM the block route returns; the pods reach each
// other throughout.
func TestConfigRouteSourceLive(t *testing.T) {
	t.Setenv("CALICO_NETWORKING_BACKEND", "vxlan")
	c := newTwoSubnetCluster(t, 1, 1)
	createPool(t, c.cl, "vx", "10.215.0.0/16", 26)
	c.setVXLANMode("vx", api.VXLANModeAlways)
	c.startAll()
	n1, n2 := c.nodes[0], c.nodes[1]
	for _, nd := range c.nodes {
		eventually(t, 30*time.Second, nd.name+" VXLAN tunnel address", func() error {
			if c.tunnelAddr(nd.name) == "" {
				return fmt.Errorf("node %s has no spec.ipv4VXLANTunnelAddr", nd.name)
			}
			return nil
		})
	}
	p1, p2 := n1.pod("net", "rs1"), n2.pod("net", "rs2")
	block := blockOf(p2.ip, 26)
	routes := func() string { return mustNS(t, n1.ns, "ip", "-4", "route", "show", "root", "10.215.0.0/16") }
	want := func(what string, present, absent string) {
		t.Helper()
		eventually(t, 30*time.Second, what, func() error {
			got := routes()
			if !hasLine(got, present+" via "+c.tunnelAddr(n2.name)+" dev vxlan.calico proto 80 onlink") {
				return fmt.Errorf("no route %s over VXLAN on node1:\n%s", present, got)
			}
			if strings.Contains(got, absent+" via") {
				return fmt.Errorf("route %s still there on node1:\n%s", absent, got)
			}
			return nil
		})
		eventually(t, 20*time.Second, what+": pod on node1 -> pod on node2", reachable(p1.ns, p2.ip))
	}
	setSource := func(src string) {
		t.Helper()
		k, _ := api.LookupKind("FelixConfiguration")
		f := k.NewObject().(*api.FelixConfiguration)
		if r, err := c.cl.GetResource(ctxBG, k, "", "default"); err == nil {
			f = r.(*api.FelixConfiguration)
		}
		f.Metadata.Name, f.Spec.RouteSource = "default", src
		if _, err := c.cl.ApplyResource(ctxBG, f); err != nil {
			t.Fatal(err)
		}
	}
	want("CalicoIPAM: node2's block", block, p2.ip)
	setSource("WorkloadIPs")
	want("WorkloadIPs: node2's pod", p2.ip, block)
	setSource("CalicoIPAM")
	want("CalicoIPAM again: node2's block", block, p2.ip)
}
