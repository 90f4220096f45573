package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store"
	"github.com/calico-aio/calico-aio/store/api"
)

// Calico policy conformance with real traffic (issue #13): two nodes in a
// BGP mesh, Kubernetes-style pods (CNI_ARGS K8S_POD_NAMESPACE/K8S_POD_NAME,
// so each endpoint gets its namespace's kns.<ns> profile) in namespaces x
// and y on both nodes, and each node's host namespace (listening on the
// node's address: the peer of a host endpoint on the node's eth0). Every
// peer listens on pcPorts. After every step the whole truth table (6 peers
// x 5 peers x 5 ports: pod and host, both directions, across nodes and on
// one node) is checked with TCP connections, with the Kubernetes
// conformance test's table (kpTable, policy_table_test.go).
//
// It runs on both datastores, in parallel: TestPolicyConformance on etcd,
// TestKDDPolicyConformance on the Kubernetes datastore (newKDDCluster: the
// nodes reach a real kube-apiserver through relays; no etcd of ours).
//
// Service accounts and services on etcd: the CNI plugin here runs on its
// etcd path without the Kubernetes API (so it fills no
// spec.serviceAccountName) and no controller runs. So the test writes what
// the Kubernetes path and the controller would: the endpoint's
// serviceAccountName and ksa.<ns>.<sa> profile, the ksa profile itself
// (k8s.ServiceAccountToProfile, labels as pcsa.*), and the services'
// endpoints as the controller publishes them from EndpointSlices
// (PublishServiceEndpoints; TestPolicyServicesTraffic covers the
// controller's side). On Kubernetes they are real ServiceAccounts, Pods
// with serviceAccountName and EndpointSlices, which the agents read.

// pcPorts are the ports every peer listens on and every probe tries: 22 is
// an inbound failsafe port of host endpoints (Calico's default), 30080 the
// NodePort of the host endpoint steps.
var pcPorts = []int{22, 80, 81, 82, 30080}

// pcTimeout bounds each step: a round probes 150 cells on shared cores.
const pcTimeout = 2 * kpTimeout

// pcCluster is the cluster with the small write helpers the steps use.
type pcCluster struct {
	*cluster
	t      *testing.T
	slices map[string][]string // on Kubernetes: the EndpointSlices applied, by Service namespace/name
}

func (c *pcCluster) apply(r api.Resource) {
	c.t.Helper()
	if _, err := c.cl.ApplyResource(ctxBG, r); err != nil {
		c.t.Fatalf("applying %s: %v", r.GetObjectMeta().Name, err)
	}
}

func (c *pcCluster) remove(kind, namespace, name string) {
	c.t.Helper()
	if _, err := c.cl.DeleteResource(ctxBG, kindOf(kind), namespace, name, ""); err != nil {
		c.t.Fatalf("deleting %s %s: %v", kind, name, err)
	}
}

// endpoint finds the WorkloadEndpoint the CNI plugin wrote for container id.
func (c *pcCluster) endpoint(id string) *api.WorkloadEndpoint {
	c.t.Helper()
	weps, _, err := c.cl.ListResources(ctxBG, kindOf("WorkloadEndpoint"), "")
	if err != nil {
		c.t.Fatal(err)
	}
	for _, r := range weps {
		if w := r.(*api.WorkloadEndpoint); w.Spec.ContainerID == id {
			return w
		}
	}
	c.t.Fatalf("no endpoint for container %s", id)
	return nil
}

// serviceAccount writes the profile ksa.<ns>.<name> as the controller
// would for a service account with these labels; on Kubernetes it writes
// the ServiceAccount, from which the profile is derived.
func (c *pcCluster) serviceAccount(namespace, name string, labels map[string]string) {
	c.t.Helper()
	if c.kube != nil {
		c.kube.serviceAccount(namespace, name, labels)
		return
	}
	c.apply(k8s.ServiceAccountToProfile(k8s.ServiceAccount{Metadata: k8s.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}}))
}

// pcPod adds a pod namespace/name on nd, labels its endpoint app=<name>
// and, when sa is set, gives it that service account; it listens on pcPorts.
// On Kubernetes the Pod (labels, serviceAccountName) is created in the API
// first and the endpoint is derived from it.
func (c *pcCluster) pod(nd *clusterNode, namespace, name, sa string) *kpPod {
	c.t.Helper()
	id := "pc-" + namespace + "-" + name
	if c.kube != nil {
		c.kube.pod(nd.name, namespace, name, sa, map[string]string{"app": name})
	}
	p := nd.pod("net", id, [2]string{"IgnoreUnknown", "1"},
		[2]string{"K8S_POD_NAMESPACE", namespace}, [2]string{"K8S_POD_NAME", name})
	for range 5 {
		if c.kube != nil {
			break
		}
		w := c.endpoint(id)
		w.Metadata.Labels["app"] = name
		if sa != "" {
			w.Spec.ServiceAccountName = sa
			w.Metadata.Labels[api.LabelServiceAccount] = sa
			w.Spec.Profiles = append(w.Spec.Profiles, k8s.ServiceAccountProfileName(namespace, sa))
		}
		_, err := c.cl.UpdateResource(ctxBG, w)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			c.t.Fatalf("updating the endpoint of %s/%s: %v", namespace, name, err)
		}
		break
	}
	for _, port := range pcPorts {
		listenPeer(c.t, p.ns, fmt.Sprintf(":%d", port))
	}
	return &kpPod{namespace: namespace, name: name, net: p}
}

// publish sets the endpoints of Service namespace/name to sls (none:
// withdrawn): on etcd as the controller publishes them, on Kubernetes as
// the Service's EndpointSlices.
func (c *pcCluster) publish(namespace, name string, sls ...ServiceSlice) {
	c.t.Helper()
	if c.kube == nil {
		PublishServiceEndpoints(c.t, c.cl, namespace, name, sls...)
		return
	}
	if c.slices == nil {
		c.slices = map[string][]string{}
	}
	svc := namespace + "/" + name
	var names []string
	for _, s := range sls {
		ApplyEndpointSlice(c.t, c.kube.api, namespace, name, s)
		names = append(names, s.Name)
	}
	for _, old := range c.slices[svc] {
		if !slices.Contains(names, old) {
			DeleteEndpointSlice(c.t, c.kube.api, namespace, old)
		}
	}
	c.slices[svc] = names
}

// pcTier is a Tier.
func pcTier(name string, order float64, action api.Action) *api.Tier {
	tr := kindOf("Tier").NewObject().(*api.Tier)
	tr.Metadata.Name, tr.Spec.Order, tr.Spec.DefaultAction = name, &order, action
	return tr
}

// pcIngress is a GlobalNetworkPolicy in tier (default: "") selecting app
// == <app> with these ingress rules.
func pcIngress(tier, name string, order float64, app string, rules ...api.Rule) *api.GlobalNetworkPolicy {
	p := gnp(name, order, fmt.Sprintf("app == %q", app), rules, nil)
	p.Spec.Tier = tier
	return p
}

// pcTCP is a rule with action for TCP to port (0: any TCP).
func pcTCP(action api.Action, port uint16, src api.EntityRule) api.Rule {
	r := api.Rule{Action: action, Protocol: protoTCP(), Source: src}
	if port != 0 {
		r.Destination.Ports = apiPorts(port)
	}
	return r
}

// pcHosts is what the host endpoint steps have set up on both nodes.
type pcHosts struct {
	heps     bool  // host endpoints on eth0 (expectedIPs: the node's address)
	in       []int // TCP ports the hosts' normal policy lets in
	out      bool  // the hosts' normal policy lets everything out
	denyAll  bool  // a deny-all normal policy ahead of it
	fwdNo81  bool  // applyOnForward ingress: forwarded TCP 81 to pods denied, the rest to pods allowed
	outNo81  bool  // applyOnForward egress: TCP 81 out through eth0 denied, forwarded or the host's own
	nodePort bool  // node2 DNATs TCP 30080 arriving on eth0 to y/d:80, as kube-proxy would
	preDNAT  bool  // preDNAT: TCP 30080 allowed from x/a, denied from everyone else
	notrack  int   // doNotTrack TCP 82 to the hosts: 0 none, 1 ingress only, 2 and its replies
}

// pcPeers places the peers of the table for pcHosts.allowed.
type pcPeers struct {
	node       map[*kpPod]*clusterNode
	nodePort   *kpPod // the host whose 30080 is DNATed
	nodePortTo *kpPod // the pod it DNATs to (port 80)
	fromA      func(*kpPod) bool
}

// allowed is Calico 3.32's verdict on a TCP connection from -> to:port with
// these host endpoint settings, given wl, the verdict of the workload
// policies alone (pods' ingress and egress). Host endpoints police only
// what crosses eth0: traffic between a node and its own pods (pods to their
// host: defaultEndpointToHostAction Accept; host to its pods: never
// policed) and between pods of one node never does. A connection between
// nodes leaves from's node through its host endpoint (a host's own traffic:
// normal egress policy; a pod's: egress applyOnForward policy, if any) and
// arrives on to's node's: doNotTrack and preDNAT policy see it first, then
// normal policy if it is for the host, or applyOnForward policy if it is
// forwarded to a pod (after DNAT), then the pod's policy.
// Failsafe TCP 22 is always open inbound; no port of the table is an
// outbound failsafe port.
func (h pcHosts) allowed(p pcPeers, wl func(from, to *kpPod, port int) bool) func(from, to *kpPod, port int) bool {
	return func(from, to *kpPod, port int) bool {
		if !to.host && !wl(from, to, port) {
			return false
		}
		if p.node[from] == p.node[to] {
			return true
		}
		if from.host && h.heps && (h.denyAll || !h.out || (h.outNo81 && port == 81)) {
			return false // the source host's egress
		}
		if !from.host && h.outNo81 && port == 81 {
			return false // forwarded out through the source node's eth0
		}
		dst, dport := to, port
		if h.nodePort && to == p.nodePort && port == 30080 {
			dst, dport = p.nodePortTo, 80
		}
		if h.preDNAT && port == 30080 {
			// An allow skips normal policy (no cell here depends on
			// whether it skips forward policy too); the pod's own policy
			// still applies.
			return p.fromA(from) && (dst.host || wl(from, dst, dport))
		}
		if !dst.host {
			return !(h.fwdNo81 && dport == 81) && wl(from, dst, dport)
		}
		switch {
		case !h.heps || port == 22:
			return true
		case port == 82 && h.notrack > 0:
			// Allowed untracked, skipping normal policy; with no
			// untracked rule for the reply, the reply has no conntrack
			// state and is dropped as INVALID.
			return h.notrack == 2
		}
		return !h.denyAll && slices.Contains(h.in, port)
	}
}

// TestPolicyConformance: pods x/a and y/c on node1, x/b and y/d on node2,
// and the two nodes' host namespaces; x/a and y/c have service account
// "front" (label role=front), x/b has "db" (role=db), y/d none. Steps:
// defaultEndpointToHostAction; tiers with a Deny default and with Pass
// (rule and defaultAction), order ties broken by name, a policy moved
// between tiers, tier deletion refused while policies name it and allowed
// once empty; host endpoints on both nodes' eth0 (no policy: default deny
// but failsafe; normal policy policing traffic to and from the hosts; a
// deny-all policy with the failsafe port still open; applyOnForward on
// traffic forwarded to pods; a NodePort-style DNAT and a preDNAT policy on
// the port before DNAT; doNotTrack with and without its reply direction);
// service-account selectors on the policy (serviceAccountSelector) and on
// the peer (rule serviceAccounts.selector) following the account's labels,
// a staged policy that changes nothing, a GlobalNetworkPolicy
// namespaceSelector, an update, deletes. Every step but the ones marked
// unchanged (a refused or invisible change) must change the table, so each
// step's expectations can fail.
func TestPolicyConformance(t *testing.T) {
	t.Parallel()
	testPolicyConformance(t, &pcCluster{cluster: newCluster(t, 2, "10.243.0"), t: t})
}

// TestKDDPolicyConformance is TestPolicyConformance on the Kubernetes
// datastore (newKDDCluster): the service accounts are ServiceAccounts,
// the pods Pods with their labels and serviceAccountName, and the
// services' endpoints EndpointSlices, all read by the agents from the API.
func TestKDDPolicyConformance(t *testing.T) {
	t.Parallel()
	testPolicyConformance(t, &pcCluster{cluster: newKDDCluster(t, 2, "10.236.0"), t: t})
}

func testPolicyConformance(t *testing.T, c *pcCluster) {
	createPool(t, c.cl, "pool", "10.171.0.0/16", 26)
	c.startAll()
	c.waitMesh(1)
	n1, n2 := c.nodes[0], c.nodes[1]
	c.serviceAccount("x", "front", map[string]string{"role": "front"})
	c.serviceAccount("x", "db", map[string]string{"role": "db"})
	c.serviceAccount("y", "front", map[string]string{"role": "front"})
	a, b := c.pod(n1, "x", "a", "front"), c.pod(n2, "x", "b", "db")
	cc, d := c.pod(n1, "y", "c", "front"), c.pod(n2, "y", "d", "")
	h1, h2 := kpHost(t, n1, pcPorts), kpHost(t, n2, pcPorts)
	eventually(t, 20*time.Second, "node1 learns node2's block", n1.routeVia(blockOf(b.net.ip, 26), n2.ip))
	eventually(t, 20*time.Second, "node2 learns node1's block", n2.routeVia(blockOf(a.net.ip, 26), n1.ip))
	tab := &kpTable{pods: []*kpPod{a, b, cc, d, h1, h2}, ports: pcPorts}
	is := func(p *kpPod, id string) bool { return p.String() == id }
	peers := pcPeers{node: map[*kpPod]*clusterNode{a: n1, cc: n1, h1: n1, b: n2, d: n2, h2: n2},
		nodePort: h2, nodePortTo: d, fromA: func(p *kpPod) bool { return p == a }}
	ownHost := func(from, to *kpPod) bool { return !from.host && to.host && peers.node[from] == peers.node[to] }
	// A host's connections to its own pods are never policed, whatever
	// the pods' policies (as in Calico: felix's OUTPUT chain returns for
	// workload interfaces); every step's expectation has that rule.
	hostToOwnPod := func(from, to *kpPod) bool { return from.host && !to.host && peers.node[from] == peers.node[to] }

	fromApp := func(app string) api.EntityRule { return api.EntityRule{Selector: fmt.Sprintf("app == %q", app)} }
	fromSA := func(sel string) api.EntityRule {
		return api.EntityRule{ServiceAccounts: &api.ServiceAccountMatch{Selector: sel}}
	}
	felixCfg := kindOf("FelixConfiguration").NewObject().(*api.FelixConfiguration)
	felixCfg.Metadata.Name, felixCfg.Spec.DefaultEndpointToHostAction = "default", "Accept"
	tierT1 := pcTier("t1", 100, api.ActionDeny)
	allow80 := pcIngress("t1", "allow-80", 10, "b", pcTCP(api.ActionAllow, 80, api.EntityRule{}))
	allow81 := pcIngress("t2", "allow-81", 10, "b", pcTCP(api.ActionAllow, 81, api.EntityRule{}))
	passA := pcIngress("t1", "pass-a", 5, "b", api.Rule{Action: api.ActionPass, Source: fromApp("a")})
	denyA := func(name string) *api.GlobalNetworkPolicy {
		return pcIngress("t1", name, 5, "b", api.Rule{Action: api.ActionDeny, Source: fromApp("a")})
	}
	// x/b's ingress once t1 passes what it does not decide and t2 holds
	// allow-80 and allow-81: TCP 80 and 81 from anyone.
	tiered := func(from, to *kpPod, port int) bool { return !is(to, "x/b") || port == 80 || port == 81 }

	svcToD := gnp("svc-to-d", 10, `app == "d"`, []api.Rule{{Action: api.ActionAllow,
		Source: api.EntityRule{Services: &api.ServiceMatch{Name: "web", Namespace: "x"}}}}, nil)
	svcFromC := gnp("svc-from-c", 10, `app == "c"`, nil, []api.Rule{{Action: api.ActionAllow,
		Destination: api.EntityRule{Services: &api.ServiceMatch{Name: "db", Namespace: "x"}}}})

	// Host endpoints: each node's eth0, its address as expectedIPs (so
	// rules can select the hosts), labelled hep.
	hep := func(nd *clusterNode) *api.HostEndpoint {
		h := hostEndpoint(nd.name+"-eth0", nd.name, "eth0")
		h.Spec.ExpectedIPs = []string{nd.ip}
		return h
	}
	hostIn := gnp("host-in", 10, "has(hep)", []api.Rule{tcpTo(api.ActionAllow, 80, 81)}, []api.Rule{{Action: api.ActionAllow}})
	hostDenyAll := gnp("host-deny-all", 1, "has(hep)", []api.Rule{{Action: api.ActionDeny}}, []api.Rule{{Action: api.ActionDeny}})
	hostForward := hostKind(gnp("host-forward", 5, "has(hep)", []api.Rule{
		{Action: api.ActionDeny, Protocol: protoTCP(), Destination: api.EntityRule{Selector: "has(app)", Ports: apiPorts(81)}},
		{Action: api.ActionAllow, Destination: api.EntityRule{Selector: "has(app)"}},
	}, nil), "forward")
	hostForwardOut := hostKind(gnp("host-forward-out", 6, "has(hep)", nil, []api.Rule{tcpTo(api.ActionDeny, 81), {Action: api.ActionAllow}}), "forward")
	hostPreDNAT := hostKind(gnp("host-nodeport", 5, "has(hep)", []api.Rule{
		{Action: api.ActionAllow, Protocol: protoTCP(), Source: fromApp("a"), Destination: api.EntityRule{Ports: apiPorts(30080)}},
		tcpTo(api.ActionDeny, 30080),
	}, nil), "preDNAT")
	hostUntracked := func(replies bool) *api.GlobalNetworkPolicy {
		var egress []api.Rule
		if replies {
			egress = []api.Rule{{Action: api.ActionAllow, Protocol: protoTCP(), Source: api.EntityRule{Selector: "has(hep)", Ports: apiPorts(82)}}}
		}
		return hostKind(gnp("host-untracked", 5, "has(hep)", []api.Rule{{Action: api.ActionAllow, Protocol: protoTCP(),
			Destination: api.EntityRule{Selector: "has(hep)", Ports: apiPorts(82)}}}, egress), "untracked")
	}
	// nodePort adds (-A) or removes (-D) kube-proxy's kind of NodePort
	// rule on node2: TCP 30080 arriving on eth0 for the node goes to y/d:80.
	nodePort := func(op string) {
		mustNS(t, n2.ns, "iptables", "-t", "nat", op, "PREROUTING", "-i", "eth0", "-d", n2.ip, "-p", "tcp", "--dport", "30080",
			"-j", "DNAT", "--to-destination", hostPort(d.net.ip, 80))
	}
	// tracked counts node2's conntrack entries of TCP connections from
	// node1 and its pods to node2's address and port.
	tracked := func(port int) int {
		n := 0
		for _, src := range []*kpPod{a, cc, h1} {
			out, _ := inNS(n2.ns, "conntrack", "-L", "-p", "tcp", "--orig-src", src.net.ip, "--orig-dst", n2.ip, "--orig-port-dst", fmt.Sprint(port))
			n += strings.Count(out, "dport="+fmt.Sprint(port))
		}
		return n
	}
	withHosts := func(h pcHosts) func(from, to *kpPod, port int) bool { return h.allowed(peers, tiered) }
	hostsOpen := pcHosts{heps: true, in: []int{80, 81}, out: true}

	saDB := gnp("sa-db-from-front", 10, "all()", []api.Rule{{Action: api.ActionAllow, Source: fromSA(`role == "front"`)}}, nil)
	saDB.Spec.ServiceAccountSelector = `role == "db"`
	frontEgress := gnp("front-egress", 20, "all()", nil, []api.Rule{{Action: api.ActionAllow,
		Destination: api.EntityRule{ServiceAccounts: &api.ServiceAccountMatch{Selector: `role == "db"`}}}})
	frontEgress.Spec.ServiceAccountSelector = `role == "front"`
	deny82In := func(ns string) *api.GlobalNetworkPolicy {
		p := gnp("deny-82-in-ns", 30, "all()", []api.Rule{pcTCP(api.ActionDeny, 82, api.EntityRule{}), {Action: api.ActionAllow}}, nil)
		p.Spec.NamespaceSelector = fmt.Sprintf("projectcalico.org/name == %q", ns)
		return p
	}
	staged := kindOf("StagedGlobalNetworkPolicy").NewObject().(*api.StagedGlobalNetworkPolicy)
	staged.Metadata.Name = "staged-deny-all"
	staged.Spec.Selector, staged.Spec.Types = "all()", []api.PolicyType{api.PolicyTypeIngress, api.PolicyTypeEgress}
	staged.Spec.Ingress, staged.Spec.Egress = []api.Rule{{Action: api.ActionDeny}}, []api.Rule{{Action: api.ActionDeny}}

	steps := []struct {
		name      string
		unchanged bool // the step must leave the table as it was
		change    func()
		allowed   func(from, to *kpPod, port int) bool
	}{
		{"no policy: the kns profiles allow all but pods to their own host (defaultEndpointToHostAction Drop)", false, func() {},
			func(from, to *kpPod, port int) bool { return !ownHost(from, to) }},
		{"FelixConfiguration defaultEndpointToHostAction Accept: pods reach their own host", false, func() {
			c.apply(felixCfg)
		}, func(from, to *kpPod, port int) bool { return true }},
		{"tier t1 (order 100, default Deny) allows x/b only TCP 80", false, func() {
			c.apply(tierT1)
			c.apply(allow80)
		}, func(from, to *kpPod, port int) bool { return !is(to, "x/b") || port == 80 }},
		{"t1's pass-a (order 5) Passes x/a's traffic to tier t2 (order 200, Deny), which allows 81", false, func() {
			c.apply(pcTier("t2", 200, api.ActionDeny))
			c.apply(allow81)
			c.apply(passA)
		}, func(from, to *kpPod, port int) bool {
			if !is(to, "x/b") {
				return true
			}
			if is(from, "x/a") {
				return port == 81
			}
			return port == 80
		}},
		{"t1 defaultAction Pass: what t1 leaves undecided goes to t2", false, func() {
			c.apply(pcTier("t1", 100, api.ActionPass))
		}, func(from, to *kpPod, port int) bool {
			if !is(to, "x/b") {
				return true
			}
			if is(from, "x/a") {
				return port == 81
			}
			return port == 80 || port == 81
		}},
		{"order tie in t1: aa-deny-a (order 5) sorts before pass-a (order 5) by name", false, func() {
			c.apply(denyA("aa-deny-a"))
		}, func(from, to *kpPod, port int) bool {
			return !is(to, "x/b") || (!is(from, "x/a") && (port == 80 || port == 81))
		}},
		{"order tie in t1: zz-deny-a (order 5) sorts after pass-a, which wins", false, func() {
			c.remove("GlobalNetworkPolicy", "", "aa-deny-a")
			c.apply(denyA("zz-deny-a"))
		}, func(from, to *kpPod, port int) bool {
			if !is(to, "x/b") {
				return true
			}
			if is(from, "x/a") {
				return port == 81
			}
			return port == 80 || port == 81
		}},
		{"allow-80 moved from t1 to t2: x/a's passed traffic now gets 80 too", false, func() {
			moved := pcIngress("t2", "allow-80", 10, "b", pcTCP(api.ActionAllow, 80, api.EntityRule{}))
			c.apply(moved)
		}, tiered},
		{"deleting tier t2 is refused while policies name it", true, func() {
			_, err := c.cl.DeleteResource(ctxBG, kindOf("Tier"), "", "t2", "")
			var notEmpty *store.TierNotEmptyError
			if !errors.As(err, &notEmpty) || notEmpty.Tier != "t2" || len(notEmpty.Policies) != 2 {
				t.Fatalf("deleting tier t2 with two policies: %v, want a TierNotEmptyError naming both", err)
			}
		}, tiered},
		{"host endpoints on both nodes' eth0, no policy: hosts closed but inbound failsafe 22; forwarded traffic not policed", false, func() {
			c.apply(hep(n1))
			c.apply(hep(n2))
		}, withHosts(pcHosts{heps: true})},
		{"normal host policy: hosts accept TCP 80 and 81 and send anything", false, func() {
			c.apply(hostIn)
		}, withHosts(hostsOpen)},
		{"deny-all host policy (order 1) ahead of it: inbound failsafe 22 still open", false, func() {
			c.apply(hostDenyAll)
		}, withHosts(pcHosts{heps: true, in: []int{80, 81}, out: true, denyAll: true})},
		{"deny-all host policy deleted", false, func() {
			c.remove("GlobalNetworkPolicy", "", "host-deny-all")
		}, withHosts(hostsOpen)},
		{"applyOnForward host policy: forwarded TCP 81 to pods denied, other forwarded traffic to pods allowed", false, func() {
			c.apply(hostForward)
		}, withHosts(pcHosts{heps: true, in: []int{80, 81}, out: true, fwdNo81: true})},
		{"applyOnForward egress host policy: TCP 81 out through eth0 denied, pods' forwarded and the hosts' own", false, func() {
			c.apply(hostForwardOut)
		}, withHosts(pcHosts{heps: true, in: []int{80, 81}, out: true, fwdNo81: true, outNo81: true})},
		{"NodePort-style DNAT on node2 (eth0 TCP 30080 to y/d:80): forwarded, so the hosts' normal policy no longer sees it", false, func() {
			nodePort("-A")
		}, withHosts(pcHosts{heps: true, in: []int{80, 81}, out: true, fwdNo81: true, outNo81: true, nodePort: true})},
		{"preDNAT host policy on the port before DNAT: TCP 30080 allowed from x/a only (NodePort and pods)", false, func() {
			c.apply(hostPreDNAT)
		}, withHosts(pcHosts{heps: true, in: []int{80, 81}, out: true, fwdNo81: true, outNo81: true, nodePort: true, preDNAT: true})},
		{"doNotTrack host policy: TCP 82 to the hosts and its replies allowed untracked, past the normal policy", false, func() {
			// Forget the tracked connections to node2:82 of the steps
			// without host endpoints (the next step's check counts them).
			_, _ = inNS(n2.ns, "conntrack", "-D", "-p", "tcp", "--orig-dst", n2.ip, "--orig-port-dst", "82")
			c.apply(hostUntracked(true))
		}, withHosts(pcHosts{heps: true, in: []int{80, 81}, out: true, fwdNo81: true, nodePort: true, outNo81: true, preDNAT: true, notrack: 2})},
		{"doNotTrack without the reply rule: replies have no conntrack state and are dropped", false, func() {
			// The previous step's connections from node1 to node2:82
			// left no conntrack entry there; those to node2:80 did.
			if n := tracked(82); n != 0 {
				t.Errorf("untracked connections from node1 to %s:82 have %d conntrack entries", n2.ip, n)
			}
			if n := tracked(80); n == 0 {
				t.Errorf("no conntrack entry for connections from node1 to %s:80 (the check cannot see entries)", n2.ip)
			}
			c.apply(hostUntracked(false))
		}, withHosts(pcHosts{heps: true, in: []int{80, 81}, out: true, fwdNo81: true, nodePort: true, outNo81: true, preDNAT: true, notrack: 1})},
		{"host endpoints, their policies and the NodePort rule deleted", false, func() {
			for _, name := range []string{"host-in", "host-forward", "host-forward-out", "host-nodeport", "host-untracked"} {
				c.remove("GlobalNetworkPolicy", "", name)
			}
			c.remove("HostEndpoint", "", n1.name+"-eth0")
			c.remove("HostEndpoint", "", n2.name+"-eth0")
			nodePort("-D")
		}, tiered},
		// Service matches (rule services): the services' endpoints
		// (pcCluster.publish).
		{"source.services x/web (endpoints x/a) is all y/d accepts (and its own host node2)", false, func() {
			c.publish("x", "web", ServiceSlice{Name: "web-1", Addresses: []string{a.net.ip}, Ports: []int{80}})
			c.apply(svcToD)
		}, func(from, to *kpPod, port int) bool {
			return tiered(from, to, port) && (!is(to, "y/d") || is(from, "x/a") || is(from, "node2"))
		}},
		{"x/web's endpoints change to y/c: y/d follows", false, func() {
			c.publish("x", "web", ServiceSlice{Name: "web-1", Addresses: []string{cc.net.ip}, Ports: []int{80}})
		}, func(from, to *kpPod, port int) bool {
			return tiered(from, to, port) && (!is(to, "y/d") || is(from, "y/c") || is(from, "node2"))
		}},
		{"x/web's endpoints withdrawn: its match matches nothing, y/d accepts only node2", false, func() {
			c.publish("x", "web")
		}, func(from, to *kpPod, port int) bool {
			return tiered(from, to, port) && (!is(to, "y/d") || is(from, "node2"))
		}},
		{"destination.services x/db (x/b TCP 81) is all y/c may send to", false, func() {
			c.publish("x", "db", ServiceSlice{Name: "db-1", Addresses: []string{b.net.ip}, Ports: []int{81}})
			c.apply(svcFromC)
		}, func(from, to *kpPod, port int) bool {
			return tiered(from, to, port) && (!is(to, "y/d") || is(from, "node2")) &&
				(!is(from, "y/c") || (is(to, "x/b") && port == 81))
		}},
		{"x/db's endpoint port changes to 80: y/c follows", false, func() {
			c.publish("x", "db", ServiceSlice{Name: "db-1", Addresses: []string{b.net.ip}, Ports: []int{80}})
		}, func(from, to *kpPod, port int) bool {
			return tiered(from, to, port) && (!is(to, "y/d") || is(from, "node2")) &&
				(!is(from, "y/c") || (is(to, "x/b") && port == 80))
		}},
		{"t2 emptied and deleted: t1's Passes reach the profiles, which allow", false, func() {
			c.remove("GlobalNetworkPolicy", "", "svc-to-d")
			c.remove("GlobalNetworkPolicy", "", "svc-from-c")
			c.publish("x", "db")
			c.remove("GlobalNetworkPolicy", "", "allow-80")
			c.remove("GlobalNetworkPolicy", "", "allow-81")
			c.remove("Tier", "", "t2")
		}, func(from, to *kpPod, port int) bool { return true }},
		{"t1 emptied and deleted", true, func() {
			c.remove("GlobalNetworkPolicy", "", "pass-a")
			c.remove("GlobalNetworkPolicy", "", "zz-deny-a")
			c.remove("Tier", "", "t1")
			if _, err := c.cl.GetResource(ctxBG, kindOf("Tier"), "", "t1"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("tier t1 after its delete: %v", err)
			}
		}, func(from, to *kpPod, port int) bool { return true }},
		{`serviceAccountSelector role == "db" (x/b), from serviceAccounts.selector role == "front" (x/a, y/c)`, false, func() {
			c.apply(saDB)
		}, func(from, to *kpPod, port int) bool { return !is(to, "x/b") || is(from, "x/a") || is(from, "y/c") }},
		{"y's account front relabelled role=other: y/c no longer matches", false, func() {
			c.serviceAccount("y", "front", map[string]string{"role": "other"})
		}, func(from, to *kpPod, port int) bool { return !is(to, "x/b") || is(from, "x/a") }},
		{`egress of accounts role == "front" (x/a) only to accounts role == "db" (x/b), not its host`, false, func() {
			c.apply(frontEgress)
		}, func(from, to *kpPod, port int) bool {
			return (!is(to, "x/b") || is(from, "x/a")) && (!is(from, "x/a") || is(to, "x/b"))
		}},
		{"a staged deny-all policy changes nothing", true, func() { c.apply(staged) },
			func(from, to *kpPod, port int) bool {
				return (!is(to, "x/b") || is(from, "x/a")) && (!is(from, "x/a") || is(to, "x/b"))
			}},
		{"global policy with namespaceSelector name == y denies TCP 82 into y", false, func() {
			c.apply(deny82In("y"))
		}, func(from, to *kpPod, port int) bool {
			return (!is(to, "x/b") || is(from, "x/a")) && (!is(from, "x/a") || is(to, "x/b")) && (to.namespace != "y" || port != 82)
		}},
		{"update: namespaceSelector name == x; x/b's other peers reach its rules (82 denied)", false, func() {
			c.apply(deny82In("x"))
		}, func(from, to *kpPod, port int) bool {
			if is(from, "x/a") {
				return is(to, "x/b")
			}
			return to.namespace != "x" || port != 82
		}},
		{"delete the service-account policies", false, func() {
			c.remove("GlobalNetworkPolicy", "", "sa-db-from-front")
			c.remove("GlobalNetworkPolicy", "", "front-egress")
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || port != 82 }},
		{"delete the rest: everything allowed again", false, func() {
			c.remove("GlobalNetworkPolicy", "", "deny-82-in-ns")
			c.remove("StagedGlobalNetworkPolicy", "", "staged-deny-all")
		}, func(from, to *kpPod, port int) bool { return true }},
	}

	var prev []bool
	var b2 strings.Builder
	fmt.Fprintf(&b2, "%-4s %-120s %8s %8s\n", "step", "case", "traffic", "allowed")
	for i, s := range steps {
		want := tab.want(func(from, to *kpPod, port int) bool { return hostToOwnPod(from, to) || s.allowed(from, to, port) })
		if i > 0 && slices.Equal(want, prev) != s.unchanged {
			t.Fatalf("step %d (%s): table equal to the previous step's: %v, want %v", i, s.name, !s.unchanged, s.unchanged)
		}
		prev = want
		s.change()
		took := tab.expect(t, fmt.Sprintf("step %d: %s", i, s.name), want, pcTimeout)
		n := 0
		for _, w := range want {
			if w {
				n++
			}
		}
		fmt.Fprintf(&b2, "%-4d %-120s %8s %4d/%d\n", i, s.name, took.Round(time.Millisecond), n, len(want))
	}
	t.Logf("%d steps, truth tables checked (traffic: until one round of probes matched):\n%s", len(steps), b2.String())
}
