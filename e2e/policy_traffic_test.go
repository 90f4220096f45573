package e2e

import (
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// Traffic tests of the agent's policy: pods wired by the CNI plugin on one
// node with calico-node running; every step asserts traffic that must get
// through and traffic that must not, with real ping and TCP.

// Labels select: only role=client reaches role=server, over IPv4 and IPv6;
// swapping the labels swaps who gets through.
func TestPolicyTrafficSelector(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 20, "10.120.0.0/24", "fd00:120::/64")
	client, other, server := e.newPod(l, "client"), e.newPod(l, "other"), e.newPod(l, "server")
	e.label(client, map[string]string{"role": "client"})
	e.label(other, map[string]string{"role": "other"})
	e.label(server, map[string]string{"role": "server"})
	expectTraffic(t, "the network's profile lets its pods talk",
		allow("client->server v4", reachable(client.ns, server.ip)),
		allow("other->server v4", reachable(other.ns, server.ip)),
		allow("other->server v6", reachable(other.ns, server.ip6)))

	e.apply(gnp("server-from-client", 10, `role == "server"`,
		[]api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: `role == "client"`}}}, nil))
	expectTraffic(t, "only role=client reaches role=server",
		allow("client->server v4", reachable(client.ns, server.ip)),
		allow("client->server v6", reachable(client.ns, server.ip6)),
		deny("other->server v4", reachable(other.ns, server.ip)),
		deny("other->server v6", reachable(other.ns, server.ip6)),
		allow("server->other v4 (not selected for ingress)", reachable(server.ns, other.ip)))

	e.label(client, map[string]string{"role": "other"})
	e.label(other, map[string]string{"role": "client"})
	expectTraffic(t, "relabelled pods swap places",
		deny("old client->server v4", reachable(client.ns, server.ip)),
		deny("old client->server v6", reachable(client.ns, server.ip6)),
		allow("new client->server v4", reachable(other.ns, server.ip)),
		allow("new client->server v6", reachable(other.ns, server.ip6)))
}

// A port rule: TCP 80 is allowed, 81 (listening, reachable before) is not;
// moving the rule to 81 swaps them.
func TestPolicyTrafficPorts(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 21, "10.121.0.0/24", "fd00:121::/64")
	client, server := e.newPod(l, "client"), e.newPod(l, "server")
	e.label(server, map[string]string{"role": "server"})
	for _, port := range []int{80, 81} {
		listenPeer(t, server.ns, hostPort(server.ip, port))
		listenPeer(t, server.ns, hostPort(server.ip6, port))
	}
	tcpTo := func(ip string, port int) func() error { return tcpProbe(client.ns, hostPort(ip, port)) }
	expectTraffic(t, "both ports open without policy",
		allow("tcp 80", tcpTo(server.ip, 80)), allow("tcp 81", tcpTo(server.ip, 81)),
		allow("tcp6 81", tcpTo(server.ip6, 81)))

	web := func(port uint16) *api.GlobalNetworkPolicy {
		return gnp("web", 10, `role == "server"`, []api.Rule{{Action: api.ActionAllow, Protocol: protoTCP(),
			Destination: api.EntityRule{Ports: apiPorts(port)}}}, nil)
	}
	e.apply(web(80))
	expectTraffic(t, "only TCP 80 allowed",
		allow("tcp 80", tcpTo(server.ip, 80)), allow("tcp6 80", tcpTo(server.ip6, 80)),
		deny("tcp 81", tcpTo(server.ip, 81)), deny("tcp6 81", tcpTo(server.ip6, 81)),
		deny("ping", reachable(client.ns, server.ip)))

	e.apply(web(81))
	expectTraffic(t, "only TCP 81 allowed",
		deny("tcp 80", tcpTo(server.ip, 80)), deny("tcp6 80", tcpTo(server.ip6, 80)),
		allow("tcp 81", tcpTo(server.ip, 81)), allow("tcp6 81", tcpTo(server.ip6, 81)))
}

// Nets and notNets in an egress rule, and a GlobalNetworkSet chosen by its
// labels in an ingress rule (changing its nets changes who gets in).
func TestPolicyTrafficCIDR(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 22, "10.122.0.0/24", "")
	a, b, c := e.newPod(l, "a"), e.newPod(l, "b"), e.newPod(l, "c")
	e.label(a, map[string]string{"role": "client"})
	e.label(b, map[string]string{"role": "server"})

	egressTo := func(dst api.EntityRule) *api.GlobalNetworkPolicy {
		return gnp("a-out", 10, `role == "client"`, nil, []api.Rule{{Action: api.ActionAllow, Destination: dst}})
	}
	e.apply(egressTo(api.EntityRule{Nets: []string{b.ip + "/32"}}))
	expectTraffic(t, "egress only to nets [b]",
		allow("a->b", reachable(a.ns, b.ip)), deny("a->c", reachable(a.ns, c.ip)))

	e.apply(egressTo(api.EntityRule{NotNets: []string{b.ip + "/32"}}))
	expectTraffic(t, "egress anywhere but notNets [b]",
		deny("a->b", reachable(a.ns, b.ip)), allow("a->c", reachable(a.ns, c.ip)))
	e.remove("GlobalNetworkPolicy", "", "a-out")

	gns := kindOf("GlobalNetworkSet").NewObject().(*api.GlobalNetworkSet)
	gns.Metadata.Name, gns.Metadata.Labels = "trusted", map[string]string{"trust": "yes"}
	gns.Spec.Nets = []string{c.ip + "/32"}
	e.apply(gns)
	e.apply(gnp("b-in", 10, `role == "server"`,
		[]api.Rule{{Action: api.ActionAllow, Source: api.EntityRule{Selector: `trust == "yes"`}}}, nil))
	expectTraffic(t, "ingress from the trusted network set only",
		allow("c->b", reachable(c.ns, b.ip)), deny("a->b", reachable(a.ns, b.ip)))

	gns.Spec.Nets = []string{a.ip + "/32"}
	gns.Metadata.ResourceVersion = ""
	e.apply(gns)
	expectTraffic(t, "the set's new nets decide",
		deny("c->b", reachable(c.ns, b.ip)), allow("a->b", reachable(a.ns, b.ip)))
}

// Pass skips the remaining policies and lets the profiles decide: a Pass
// at order 1 overrides a Deny at order 10; at order 20 the Deny wins.
func TestPolicyTrafficPassAndOrder(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 23, "10.123.0.0/24", "")
	l2 := e.conflist("1.0.0", "net2", e.calicoPlugin("node1", ""))
	a, b, c := e.newPod(l, "a"), e.newPod(l, "b"), e.newPod(l2, "c")
	e.label(b, map[string]string{"role": "server"})

	e.apply(gnp("deny", 10, `role == "server"`, []api.Rule{{Action: api.ActionDeny}}, nil))
	expectTraffic(t, "deny at order 10",
		deny("a->b", reachable(a.ns, b.ip)), allow("b->a", reachable(b.ns, a.ip)))

	pass := func(order float64) *api.GlobalNetworkPolicy {
		return gnp("pass", order, `role == "server"`, []api.Rule{{Action: api.ActionPass}}, nil)
	}
	e.apply(pass(1))
	expectTraffic(t, "pass at order 1: the profile decides",
		allow("a->b (same network)", reachable(a.ns, b.ip)),
		deny("c->b (other network)", reachable(c.ns, b.ip)))

	e.apply(pass(20))
	expectTraffic(t, "pass at order 20: the deny comes first",
		deny("a->b", reachable(a.ns, b.ip)), allow("b->a", reachable(b.ns, a.ip)))
}

// Profiles: pods of one network talk, pods of different networks do not;
// widening one profile's ingress lets the other network in, one way.
func TestPolicyTrafficProfiles(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 24, "10.124.0.0/24", "fd00:124::/64")
	l2 := e.conflist("1.0.0", "net2", e.calicoPlugin("node1", `,"assign_ipv6":"true"`))
	a, b := e.newPod(l, "a"), e.newPod(l, "b")
	c, d := e.newPod(l2, "c"), e.newPod(l2, "d")
	expectTraffic(t, "networks are isolated by their profiles",
		allow("net1 a->b", reachable(a.ns, b.ip)), allow("net1 a->b v6", reachable(a.ns, b.ip6)),
		allow("net2 c->d", reachable(c.ns, d.ip)), allow("net2 c->d v6", reachable(c.ns, d.ip6)),
		deny("net1->net2", reachable(a.ns, c.ip)), deny("net1->net2 v6", reachable(a.ns, c.ip6)),
		deny("net2->net1", reachable(d.ns, b.ip)), deny("net2->net1 v6", reachable(d.ns, b.ip6)))

	prof := getAs[*api.Profile](e, "Profile", "", "net2")
	prof.Spec.Ingress = append(prof.Spec.Ingress, api.Rule{Action: api.ActionAllow, Source: api.EntityRule{Selector: "has(net1)"}})
	e.apply(prof)
	expectTraffic(t, "net2 admits net1",
		allow("net1->net2", reachable(a.ns, c.ip)), allow("net1->net2 v6", reachable(a.ns, c.ip6)),
		deny("net2->net1", reachable(d.ns, b.ip)), deny("net2->net1 v6", reachable(d.ns, b.ip6)))
}

// An ingress policy selecting an endpoint denies whatever its rules do not
// allow: with only "allow TCP 80", ping and TCP 8080 stop; egress from the
// endpoint is not affected.
func TestPolicyTrafficDefaultDeny(t *testing.T) {
	t.Parallel()
	e, l := policyEnv(t, 25, "10.125.0.0/24", "")
	client, server := e.newPod(l, "client"), e.newPod(l, "server")
	e.label(server, map[string]string{"role": "server"})
	for _, port := range []int{80, 8080} {
		listenPeer(t, server.ns, hostPort(server.ip, port))
	}
	expectTraffic(t, "open before the policy",
		allow("ping", reachable(client.ns, server.ip)),
		allow("tcp 8080", tcpProbe(client.ns, hostPort(server.ip, 8080))))

	e.apply(gnp("web-only", 10, `role == "server"`, []api.Rule{{Action: api.ActionAllow, Protocol: protoTCP(),
		Destination: api.EntityRule{Ports: apiPorts(80)}}}, nil))
	expectTraffic(t, "selected endpoint denies what is not allowed",
		allow("tcp 80", tcpProbe(client.ns, hostPort(server.ip, 80))),
		deny("tcp 8080", tcpProbe(client.ns, hostPort(server.ip, 8080))),
		deny("ping", reachable(client.ns, server.ip)),
		allow("server's egress unaffected", reachable(server.ns, client.ip)))
}
