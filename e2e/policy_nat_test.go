package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// Traffic tests of the agent's NAT and anti-spoofing: NAT outgoing and
// floating IPs seen from the "outside" namespace, spoofed sources dropped.

// setNATOutgoing flips a pool's natOutgoing.
func (e *cniEnv) setNATOutgoing(pool string, on bool) {
	e.t.Helper()
	p := getAs[*api.IPPool](e, "IPPool", "", pool)
	p.Spec.NATOutgoing = on
	if _, err := e.cl.UpdateResource(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
}

// sourceSeen waits until a connection from a pod to a listenPeer listener
// arrives from want.
func sourceSeen(t *testing.T, p pod, addr, want, what string) {
	t.Helper()
	eventually(t, policyTimeout, what, func() error {
		got, err := dialPeer(p.ns, addr)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("listener saw %s, want %s", got, want)
		}
		return nil
	})
}

// With natOutgoing the outside sees the host's uplink address; without it,
// the pod's own address (the outside routes the pool back via the host).
func TestPolicyTrafficNATOutgoing(t *testing.T) {
	t.Parallel()
	const pool = "10.127.0.0/24"
	e, l := policyEnv(t, 27, pool, "")
	mustNS(t, e.host.outside, "ip", "route", "add", pool, "via", e.host.hostIP)
	listenPeer(t, e.host.outside, hostPort(e.host.outIP, 8080))
	a := e.newPod(l, "a")
	out := hostPort(e.host.outIP, 8080)

	sourceSeen(t, a, out, a.ip, "without natOutgoing the pod's address leaves the host")
	e.setNATOutgoing("v4", true)
	sourceSeen(t, a, out, e.host.hostIP, "with natOutgoing the host's address")
	e.setNATOutgoing("v4", false)
	sourceSeen(t, a, out, a.ip, "natOutgoing off again")
}

// A floating IP (spec.ipNATs) routed to the host from outside reaches the
// pod only while FelixConfiguration floatingIPs is Enabled (Calico's
// default, Disabled, ignores a Kubernetes pod's ipNATs); the setting acts
// live, and removing the ipNATs stops the traffic.
func TestPolicyTrafficFloatingIP(t *testing.T) {
	t.Parallel()
	const floating = "10.200.0.5"
	e, l := policyEnv(t, 28, "10.128.0.0/24", "")
	mustNS(t, e.host.outside, "ip", "route", "add", floating+"/32", "via", e.host.hostIP)
	a, b := e.newPod(l, "a"), e.newPod(l, "b")
	listenPeer(t, a.ns, ":8080")
	// The network's profile only admits its own pods; let the outside in.
	e.apply(gnp("open", 10, "all()", []api.Rule{{Action: api.ActionAllow}}, nil))
	fromOutside := tcpProbe(e.host.outside, hostPort(floating, 8080))
	expectTraffic(t, "no floating IP yet",
		deny("outside->floating", fromOutside), allow("b->a", tcpProbe(b.ns, hostPort(a.ip, 8080))))

	e.editEndpoint(a, func(w *api.WorkloadEndpoint) {
		w.Spec.IPNATs = []api.IPNAT{{InternalIP: a.ip, ExternalIP: floating}}
	})
	expectTraffic(t, "floatingIPs unset (Disabled): a k8s pod's ipNATs are not programmed",
		deny("outside->floating", fromOutside), allow("b->a", tcpProbe(b.ns, hostPort(a.ip, 8080))))

	setFIP := func(v string) { e.felixDefault(func(s *api.FelixConfigurationSpec) { s.FloatingIPs = &v }) }
	setFIP("Enabled")
	expectTraffic(t, "floatingIPs Enabled: floating IP reaches the pod", allow("outside->floating", fromOutside))
	if got, err := dialPeer(e.host.outside, hostPort(floating, 8080)); err != nil || got != e.host.outIP {
		t.Errorf("the pod saw %q (%v), want the outside address %s", got, err, e.host.outIP)
	}

	setFIP("Disabled")
	expectTraffic(t, "floatingIPs Disabled again",
		deny("outside->floating", fromOutside), allow("b->a", tcpProbe(b.ns, hostPort(a.ip, 8080))))

	setFIP("Enabled")
	expectTraffic(t, "floatingIPs Enabled again", allow("outside->floating", fromOutside))
	e.editEndpoint(a, func(w *api.WorkloadEndpoint) { w.Spec.IPNATs = nil })
	expectTraffic(t, "floating IP removed",
		deny("outside->floating", fromOutside), allow("b->a", tcpProbe(b.ns, hostPort(a.ip, 8080))))
}

// A pod sending from an address that is not its own is dropped on the way
// out; allowSpoofedSourcePrefixes lets exactly that source through, but,
// as in Calico, only while FelixConfiguration workloadSourceSpoofing is
// Any: with Disabled (the default) the prefixes are ignored.
func TestPolicyTrafficAntiSpoof(t *testing.T) {
	t.Parallel()
	const spoofed = "10.129.99.9"
	e, l := policyEnv(t, 29, "10.129.0.0/24", "")
	a, b := e.newPod(l, "a"), e.newPod(l, "b")
	// b accepts any source, so only anti-spoofing can stop the packets.
	e.apply(gnp("open", 10, "all()", []api.Rule{{Action: api.ActionAllow}}, nil))
	// a also owns the spoofed address, and the host routes it back to a,
	// so replies to it would return: only the source check can stop it.
	mustNS(t, a.ns, "ip", "addr", "add", spoofed+"/32", "dev", "eth0")
	mustNS(t, e.host.ns, "ip", "route", "add", spoofed+"/32", "dev", e.endpointOf(a).Spec.InterfaceName)
	sink := listenUDP(t, b.ns, hostPort(b.ip, 9000))
	pingFrom := func(src string) func() error {
		return func() error { _, err := inNS(a.ns, "ping", "-4", "-c1", "-W1", "-I", src, b.ip); return err }
	}
	expectTraffic(t, "spoofed source dropped",
		allow("udp from a's address", udpProbe(a.ns, a.ip, sink)),
		allow("ping from a's address", pingFrom(a.ip)),
		deny("udp from a spoofed address", udpProbe(a.ns, spoofed, sink)),
		deny("ping from a spoofed address", pingFrom(spoofed)))

	e.editEndpoint(a, func(w *api.WorkloadEndpoint) { w.Spec.AllowSpoofedSourcePrefixes = []string{spoofed + "/32"} })
	expectTraffic(t, "workloadSourceSpoofing Disabled (default) ignores allowSpoofedSourcePrefixes",
		deny("udp from the listed address", udpProbe(a.ns, spoofed, sink)),
		allow("udp from a's address", udpProbe(a.ns, a.ip, sink)))

	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.WorkloadSourceSpoofing = "Any" })
	expectTraffic(t, "workloadSourceSpoofing Any: allowSpoofedSourcePrefixes admits the source",
		allow("udp from the allowed address", udpProbe(a.ns, spoofed, sink)),
		allow("ping from the allowed address", pingFrom(spoofed)),
		allow("udp from a's address", udpProbe(a.ns, a.ip, sink)))

	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.WorkloadSourceSpoofing = "Disabled" })
	expectTraffic(t, "workloadSourceSpoofing Disabled again",
		deny("udp from the listed address", udpProbe(a.ns, spoofed, sink)),
		allow("udp from a's address", udpProbe(a.ns, a.ip, sink)))
}

// Workload to host: DefaultEndpointToHostAction decides after the pod's
// egress policy, and failsafe ports do not apply to workloads (in Calico
// they open host endpoints only). Host traffic from outside is left to the
// host's own rules.
func TestPolicyTrafficHostAccess(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 30, "10.130.0.0/24", "")
	a := e.newPod(l, "a")
	for _, port := range []int{22, 8081} {
		listenPeer(t, e.host.ns, hostPort(e.host.hostIP, port))
	}
	toHost := func(port int) func() error { return tcpProbe(a.ns, hostPort(e.host.hostIP, port)) }
	action := func(v string) {
		f := kindOf("FelixConfiguration").NewObject().(*api.FelixConfiguration)
		f.Metadata.Name, f.Spec.DefaultEndpointToHostAction = "default", v
		e.apply(f)
	}

	action("Accept")
	expectTraffic(t, "Accept", allow("pod->host:22", toHost(22)), allow("pod->host:8081", toHost(8081)))
	action("Drop")
	expectTraffic(t, "Drop", deny("pod->host:22", toHost(22)), deny("pod->host:8081", toHost(8081)))

	// Return hands the decision to the host's own INPUT rules.
	mustNS(t, e.host.ns, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "8081", "-j", "DROP")
	action("Return")
	expectTraffic(t, "Return", allow("pod->host:22", toHost(22)), deny("pod->host:8081", toHost(8081)))

	// Without host endpoints the agent leaves the host's own traffic to the
	// host's rules, as Calico does: the failsafe ports are open because
	// nothing of ours closes them, and an operator's rule still applies to
	// them (the agent never overrides it).
	fromOutside := func(port int) func() error { return tcpProbe(e.host.outside, hostPort(e.host.hostIP, port)) }
	expectTraffic(t, "host ports from outside",
		allow("outside->host:22", fromOutside(22)), deny("outside->host:8081", fromOutside(8081)))
	mustNS(t, e.host.ns, "iptables", "-A", "INPUT", "-i", "uplink", "-p", "tcp", "--dport", "22", "-j", "DROP")
	expectTraffic(t, "the operator's rule closes port 22", deny("outside->host:22", fromOutside(22)))
}
