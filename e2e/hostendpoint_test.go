package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// Host endpoints (issue #13), with real traffic: a HostEndpoint on a
// node's uplink, policed by normal, applyOnForward, preDNAT and doNotTrack
// policies, with the failsafe ports always open.

func hostEndpoint(name, node, iface string) *api.HostEndpoint {
	h := kindOf("HostEndpoint").NewObject().(*api.HostEndpoint)
	h.Metadata.Name, h.Metadata.Labels = name, map[string]string{"hep": "uplink"}
	h.Spec.Node, h.Spec.InterfaceName = node, iface
	return h
}

func tcpTo(action api.Action, ports ...uint16) api.Rule {
	return api.Rule{Action: action, Protocol: protoTCP(), Destination: api.EntityRule{Ports: apiPorts(ports...)}}
}

// hostKind marks a policy applyOnForward, preDNAT or doNotTrack.
func hostKind(p *api.GlobalNetworkPolicy, kind string) *api.GlobalNetworkPolicy {
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

// A host endpoint with no policy, then a deny-all policy, closes a port of
// the node to its peers, while the failsafe ports (ssh, etcd, and BGP
// itself) stay open and the BGP session stays up; an allow policy opens
// the port.
func TestHostEndpointFailsafeTraffic(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "10.242.0")
	createPool(t, c.cl, "pool", "10.122.0.0/16", 26)
	c.startAll()
	c.waitMesh(1)
	n1, n2 := c.nodes[0], c.nodes[1]
	for _, port := range []int{22, 2379, 8080} {
		listenPeer(t, n1.ns, hostPort(n1.ip, port))
	}
	probe := func(port int) func() error { return tcpProbe(n2.ns, hostPort(n1.ip, port)) }
	expectTraffic(t, "no host endpoint: the host's ports are open",
		allow("peer->node:22", probe(22)), allow("peer->node:2379", probe(2379)), allow("peer->node:8080", probe(8080)))

	h := hostEndpoint("node1-eth0", n1.name, "eth0")
	if _, err := c.cl.CreateResource(ctxBG, h); err != nil {
		t.Fatal(err)
	}
	expectTraffic(t, "host endpoint without policy: default deny but failsafe",
		allow("peer->node:22", probe(22)), allow("peer->node:2379", probe(2379)), deny("peer->node:8080", probe(8080)))

	if _, err := c.cl.CreateResource(ctxBG, gnp("deny-all", 100, "has(hep)", []api.Rule{{Action: api.ActionDeny}}, []api.Rule{{Action: api.ActionDeny}})); err != nil {
		t.Fatal(err)
	}
	expectTraffic(t, "deny-all host policy: failsafe still open",
		allow("peer->node:22", probe(22)), allow("peer->node:2379", probe(2379)), deny("peer->node:8080", probe(8080)))
	// BGP (failsafe 179 both ways) stays up: the session, broken by
	// killing the peer's agent, comes back as a new connection, which only
	// the failsafe rules let through.
	n2.kill()
	n2.start()
	c.waitMesh(1)
	rules, _ := inNS(n1.ns, "iptables-save", "-t", "filter")
	if !strings.Contains(rules, "-A cali-fh-eth0") || !strings.Contains(rules, "cali-failsafe-in") {
		t.Fatalf("no host endpoint chains:\n%s", rules)
	}

	if _, err := c.cl.CreateResource(ctxBG, gnp("allow-8080", 10, "has(hep)", []api.Rule{tcpTo(api.ActionAllow, 8080)}, nil)); err != nil {
		t.Fatal(err)
	}
	expectTraffic(t, "allow policy ahead of deny-all opens the port",
		allow("peer->node:8080", probe(8080)), allow("peer->node:22", probe(22)))
	// The agent still reaches etcd (failsafe out 2379) and applies changes.
	if _, err := c.cl.DeleteResource(ctxBG, kindOf("GlobalNetworkPolicy"), "", "allow-8080", ""); err != nil {
		t.Fatal(err)
	}
	expectTraffic(t, "allow policy deleted", deny("peer->node:8080", probe(8080)), allow("peer->node:22", probe(22)))
	if _, err := c.cl.DeleteResource(ctxBG, kindOf("HostEndpoint"), "", "node1-eth0", ""); err != nil {
		t.Fatal(err)
	}
	expectTraffic(t, "host endpoint deleted: not policed", allow("peer->node:8080", probe(8080)))
}

// hostEnv is one node (its uplink to an "outside" namespace a host
// endpoint) with a pod listening on 8080, reachable from outside through
// the node, and the node listening on 8080 too.
func hostEnv(t *testing.T, index int, pool string) (*cniEnv, pod) {
	return hostEnvWith(t, index, pool, hostEndpoint("uplink", "node1", "uplink"))
}

func hostEnvWith(t *testing.T, index int, pool string, h *api.HostEndpoint) (*cniEnv, pod) {
	e, l := policyEnv(t, index, pool, "")
	a := e.newPod(l, "a")
	listenPeer(t, a.ns, hostPort(a.ip, 8080))
	listenPeer(t, e.host.ns, hostPort(e.host.hostIP, 8080))
	mustNS(t, e.host.outside, "ip", "route", "add", pool, "via", e.host.hostIP)
	// Pods accept anything; the host endpoint's policies are under test.
	e.apply(gnp("pods-open", 1, "!has(hep)", []api.Rule{{Action: api.ActionAllow}}, []api.Rule{{Action: api.ActionAllow}}))
	e.apply(h)
	return e, a
}

// A host endpoint given by expectedIPs polices the interface carrying the
// address; traffic between the host and its own pods is not host endpoint
// traffic (workload policy and defaultEndpointToHostAction decide).
func TestHostEndpointExpectedIPsTraffic(t *testing.T) {
	t.Parallel()
	h := hostEndpoint("by-ip", "node1", "")
	h.Spec.ExpectedIPs = []string{"172.31.93.1"} // newTestHost's uplink address for index 93
	e, a := hostEnvWith(t, 93, "10.193.0.0/24", h)
	if e.host.hostIP != "172.31.93.1" {
		t.Fatalf("host address %s, want 172.31.93.1", e.host.hostIP)
	}
	f := kindOf("FelixConfiguration").NewObject().(*api.FelixConfiguration)
	f.Metadata.Name, f.Spec.DefaultEndpointToHostAction = "default", "Accept"
	e.apply(f)
	listenPeer(t, e.host.ns, hostPort(e.host.hostIP, 22))
	expectTraffic(t, "host endpoint by expectedIPs: default deny on the uplink",
		deny("outside->host:8080", tcpProbe(e.host.outside, hostPort(e.host.hostIP, 8080))),
		allow("outside->host:22 (failsafe)", tcpProbe(e.host.outside, hostPort(e.host.hostIP, 22))),
		allow("pod->host:8080 (not host endpoint traffic)", tcpProbe(a.ns, hostPort(e.host.hostIP, 8080))),
		allow("host->pod:8080 (not host endpoint traffic)", tcpProbe(e.host.ns, hostPort(a.ip, 8080))))
	e.apply(gnp("allow-8080", 10, "has(hep)", []api.Rule{tcpTo(api.ActionAllow, 8080)}, nil))
	expectTraffic(t, "policy on the host endpoint by expectedIPs",
		allow("outside->host:8080", tcpProbe(e.host.outside, hostPort(e.host.hostIP, 8080))))
}

// A normal host endpoint policy polices traffic to the host only; with
// applyOnForward it also polices traffic forwarded through the uplink to
// a pod.
func TestHostEndpointApplyOnForwardTraffic(t *testing.T) {
	t.Parallel()
	e, a := hostEnv(t, 90, "10.190.0.0/24")
	toHost := tcpProbe(e.host.outside, hostPort(e.host.hostIP, 8080))
	toPod := tcpProbe(e.host.outside, hostPort(a.ip, 8080))
	pol := gnp("no-8080", 10, "has(hep)", []api.Rule{tcpTo(api.ActionDeny, 8080), {Action: api.ActionAllow}}, []api.Rule{{Action: api.ActionAllow}})
	e.apply(pol)
	expectTraffic(t, "normal policy: host policed, forwarded traffic not",
		deny("outside->host:8080", toHost), allow("outside->pod:8080", toPod))
	e.apply(hostKind(pol, "forward"))
	expectTraffic(t, "applyOnForward: forwarded traffic policed too",
		deny("outside->host:8080", toHost), deny("outside->pod:8080", toPod))
}

// A preDNAT policy sees the port a packet was sent to before a
// NodePort-style DNAT rule changed it.
func TestHostEndpointPreDNATTraffic(t *testing.T) {
	t.Parallel()
	e, a := hostEnv(t, 91, "10.191.0.0/24")
	mustNS(t, e.host.ns, "iptables", "-t", "nat", "-A", "PREROUTING", "-i", "uplink", "-p", "tcp", "--dport", "30080",
		"-j", "DNAT", "--to-destination", hostPort(a.ip, 8080))
	nodePort := tcpProbe(e.host.outside, hostPort(e.host.hostIP, 30080))
	direct := tcpProbe(e.host.outside, hostPort(a.ip, 8080))
	expectTraffic(t, "NodePort-style DNAT reaches the pod",
		allow("outside->node:30080", nodePort), allow("outside->pod:8080", direct))
	e.apply(hostKind(gnp("no-nodeport", 10, "has(hep)", []api.Rule{tcpTo(api.ActionDeny, 30080)}, nil), "preDNAT"))
	expectTraffic(t, "preDNAT policy denies the pre-DNAT port only",
		deny("outside->node:30080", nodePort), allow("outside->pod:8080", direct))
	// A normal policy on the post-DNAT port does not see forwarded traffic.
	e.apply(gnp("no-8080", 10, "has(hep)", []api.Rule{tcpTo(api.ActionDeny, 8080)}, nil))
	e.remove("GlobalNetworkPolicy", "", "no-nodeport")
	expectTraffic(t, "without the preDNAT policy",
		allow("outside->node:30080", nodePort), allow("outside->pod:8080", direct))
}

// A doNotTrack policy allows in the raw table: the flow is not tracked
// (conntrack has no entry) and skips the normal policy, which denies by
// default; a failsafe flow is tracked as usual.
func TestHostEndpointDoNotTrackTraffic(t *testing.T) {
	t.Parallel()
	e, _ := hostEnv(t, 92, "10.192.0.0/24")
	for _, port := range []int{22, 7000, 7001} {
		listenPeer(t, e.host.ns, hostPort(e.host.hostIP, port))
	}
	probe := func(port int) func() error { return tcpProbe(e.host.outside, hostPort(e.host.hostIP, port)) }
	expectTraffic(t, "host endpoint without policy",
		allow("outside->host:22", probe(22)), deny("outside->host:7000", probe(7000)))
	untracked := hostKind(gnp("raw-7000", 10, "has(hep)", []api.Rule{tcpTo(api.ActionAllow, 7000)},
		[]api.Rule{{Action: api.ActionAllow, Protocol: protoTCP(), Source: api.EntityRule{Ports: apiPorts(7000)}}}), "untracked")
	e.apply(untracked)
	expectTraffic(t, "untracked allow",
		allow("outside->host:7000", probe(7000)), deny("outside->host:7001", probe(7001)), allow("outside->host:22", probe(22)))
	mustNS(t, e.host.ns, "conntrack", "-F")
	for _, port := range []int{7000, 22} {
		if err := probe(port)(); err != nil {
			t.Fatalf("port %d: %v", port, err)
		}
	}
	entries := func(port int) int {
		out, _ := inNS(e.host.ns, "conntrack", "-L", "-p", "tcp", "--orig-port-dst", fmt.Sprint(port))
		return strings.Count(out, "dport="+fmt.Sprint(port))
	}
	if n := entries(7000); n != 0 {
		t.Errorf("untracked flow to 7000 has %d conntrack entries", n)
	}
	if n := entries(22); n == 0 {
		t.Errorf("failsafe flow to 22 has no conntrack entry (the check cannot see entries)")
	}
	rules, _ := inNS(e.host.ns, "iptables-save", "-t", "raw")
	if !strings.Contains(rules, "NOTRACK") && !strings.Contains(rules, "--notrack") {
		t.Errorf("raw table has no NOTRACK rule:\n%s", rules)
	}
}

// A "*" host endpoint polices every host interface but lo, and traffic
// from the node's own pods to the host after their egress policy; host to
// pod traffic is not policed; the agent keeps working (its datastore is on
// lo here).
func TestHostEndpointWildcardTraffic(t *testing.T) {
	t.Parallel()
	e, a := hostEnvWith(t, 94, "10.194.0.0/24", hostEndpoint("all", "node1", "*"))
	f := kindOf("FelixConfiguration").NewObject().(*api.FelixConfiguration)
	f.Metadata.Name, f.Spec.DefaultEndpointToHostAction = "default", "Accept"
	e.apply(f)
	listenPeer(t, e.host.ns, hostPort(e.host.hostIP, 22))
	outside := func(port int) func() error { return tcpProbe(e.host.outside, hostPort(e.host.hostIP, port)) }
	fromPod := func(port int) func() error { return tcpProbe(a.ns, hostPort(e.host.hostIP, port)) }
	expectTraffic(t, "* host endpoint without policy",
		deny("outside->host:8080", outside(8080)), allow("outside->host:22", outside(22)),
		deny("pod->host:8080", fromPod(8080)), allow("pod->host:22 (failsafe)", fromPod(22)),
		allow("host->pod:8080", tcpProbe(e.host.ns, hostPort(a.ip, 8080))),
		allow("outside->pod:8080 (forwarded)", tcpProbe(e.host.outside, hostPort(a.ip, 8080))))
	e.apply(gnp("allow-8080", 10, "has(hep)", []api.Rule{tcpTo(api.ActionAllow, 8080)}, nil))
	expectTraffic(t, "* host endpoint with an allow policy",
		allow("outside->host:8080", outside(8080)), allow("pod->host:8080", fromPod(8080)))
}
