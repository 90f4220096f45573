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
// and y on both nodes, every pod listening on TCP 80-82. After every step
// the whole truth table (4 pods x 3 peers x 3 ports, across nodes and on
// one node) is checked with TCP connections, reusing the Kubernetes
// conformance test's table (kpTable, policy_table_test.go).
//
// Service accounts: the CNI plugin fills spec.serviceAccountName only from
// a pod it reads from the Kubernetes API (its Kubernetes path, covered by
// the k8s CNI tests), and the multi-node harness's nodes are network
// namespaces that cannot reach the e2e kube-apiserver (e2e/kubeapi binds
// 127.0.0.1 of the test's own namespace, with a certificate for it). So the test
// writes what that path and the controller would: the endpoint's
// serviceAccountName and ksa.<ns>.<sa> profile, and the ksa profile itself
// (k8s.ServiceAccountToProfile, labels as pcsa.*).

// pcPorts are the ports every pod listens on and every probe tries.
var pcPorts = []int{80, 81, 82}

// pcCluster is the cluster with the small write helpers the steps use.
type pcCluster struct {
	*cluster
	t *testing.T
}

func (c *pcCluster) apply(r api.Resource) {
	c.t.Helper()
	if _, err := c.cl.ApplyResource(ctxBG, r); err != nil {
		c.t.Fatalf("applying %s: %v", r.GetObjectMeta().Name, err)
	}
}

func (c *pcCluster) remove(kind, namespace, name string) {
	c.t.Helper()
	if _, err := c.cl.DeleteResource(ctxBG, kindOf(kind), namespace, name, 0); err != nil {
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
// would for a service account with these labels.
func (c *pcCluster) serviceAccount(namespace, name string, labels map[string]string) {
	c.t.Helper()
	c.apply(k8s.ServiceAccountToProfile(k8s.ServiceAccount{Metadata: k8s.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}}))
}

// pcPod adds a pod namespace/name on nd, labels its endpoint app=<name>
// and, when sa is set, gives it that service account; it listens on pcPorts.
func (c *pcCluster) pod(nd *clusterNode, namespace, name, sa string) *kpPod {
	c.t.Helper()
	id := "pc-" + namespace + "-" + name
	p := nd.pod("net", id, [2]string{"IgnoreUnknown", "1"},
		[2]string{"K8S_POD_NAMESPACE", namespace}, [2]string{"K8S_POD_NAME", name})
	for range 5 {
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

// TestPolicyConformance: pods x/a and y/c on node1, x/b and y/d on node2;
// x/a and y/c have service account "front" (label role=front), x/b has
// "db" (role=db), y/d none. Steps: tiers with a Deny default and with
// Pass (rule and defaultAction), order ties broken by name, a policy moved
// between tiers, tier deletion refused while policies name it and allowed
// once empty, service-account selectors on the policy
// (serviceAccountSelector) and on the peer (rule serviceAccounts.selector)
// following the account's labels, a staged policy that changes nothing,
// a GlobalNetworkPolicy namespaceSelector, an update, deletes. Every step
// but the ones marked unchanged (a refused or invisible change) must
// change the table, so each step's expectations can fail.
func TestPolicyConformance(t *testing.T) {
	t.Parallel()
	c := &pcCluster{cluster: newCluster(t, 2, "10.243.0"), t: t}
	createPool(t, c.cl, "pool", "10.171.0.0/16", 26)
	c.startAll()
	c.waitMesh(1)
	n1, n2 := c.nodes[0], c.nodes[1]
	c.serviceAccount("x", "front", map[string]string{"role": "front"})
	c.serviceAccount("x", "db", map[string]string{"role": "db"})
	c.serviceAccount("y", "front", map[string]string{"role": "front"})
	a, b := c.pod(n1, "x", "a", "front"), c.pod(n2, "x", "b", "db")
	cc, d := c.pod(n1, "y", "c", "front"), c.pod(n2, "y", "d", "")
	eventually(t, 20*time.Second, "node1 learns node2's block", n1.routeVia(blockOf(b.net.ip, 26), n2.ip))
	eventually(t, 20*time.Second, "node2 learns node1's block", n2.routeVia(blockOf(a.net.ip, 26), n1.ip))
	tab := &kpTable{pods: []*kpPod{a, b, cc, d}, ports: pcPorts}

	fromApp := func(app string) api.EntityRule { return api.EntityRule{Selector: fmt.Sprintf("app == %q", app)} }
	fromSA := func(sel string) api.EntityRule {
		return api.EntityRule{ServiceAccounts: &api.ServiceAccountMatch{Selector: sel}}
	}
	tierT1 := pcTier("t1", 100, api.ActionDeny)
	allow80 := pcIngress("t1", "allow-80", 10, "b", pcTCP(api.ActionAllow, 80, api.EntityRule{}))
	allow81 := pcIngress("t2", "allow-81", 10, "b", pcTCP(api.ActionAllow, 81, api.EntityRule{}))
	passA := pcIngress("t1", "pass-a", 5, "b", api.Rule{Action: api.ActionPass, Source: fromApp("a")})
	denyA := func(name string) *api.GlobalNetworkPolicy {
		return pcIngress("t1", name, 5, "b", api.Rule{Action: api.ActionDeny, Source: fromApp("a")})
	}
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

	is := func(p *kpPod, id string) bool { return p.String() == id }
	steps := []struct {
		name      string
		unchanged bool // the step must leave the table as it was
		change    func()
		allowed   func(from, to *kpPod, port int) bool
	}{
		{"no policy: the kns profiles allow everything", false, func() {},
			func(from, to *kpPod, port int) bool { return true }},
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
			return port != 82
		}},
		{"order tie in t1: aa-deny-a (order 5) sorts before pass-a (order 5) by name", false, func() {
			c.apply(denyA("aa-deny-a"))
		}, func(from, to *kpPod, port int) bool { return !is(to, "x/b") || (!is(from, "x/a") && port != 82) }},
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
			return port != 82
		}},
		{"allow-80 moved from t1 to t2: x/a's passed traffic now gets 80 too", false, func() {
			moved := pcIngress("t2", "allow-80", 10, "b", pcTCP(api.ActionAllow, 80, api.EntityRule{}))
			c.apply(moved)
		}, func(from, to *kpPod, port int) bool { return !is(to, "x/b") || port != 82 }},
		{"deleting tier t2 is refused while policies name it", true, func() {
			_, err := c.cl.DeleteResource(ctxBG, kindOf("Tier"), "", "t2", 0)
			var notEmpty *store.TierNotEmptyError
			if !errors.As(err, &notEmpty) || notEmpty.Tier != "t2" || len(notEmpty.Policies) != 2 {
				t.Fatalf("deleting tier t2 with two policies: %v, want a TierNotEmptyError naming both", err)
			}
		}, func(from, to *kpPod, port int) bool { return !is(to, "x/b") || port != 82 }},
		// Host endpoint steps (issue #13: deny-all with failsafe ports
		// open, preDNAT, doNotTrack, applyOnForward) go here, with a host
		// endpoint on each node in the table.
		{"t2 emptied and deleted: t1's Passes reach the profiles, which allow", false, func() {
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
		{`egress of accounts role == "front" (x/a) only to accounts role == "db" (x/b)`, false, func() {
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
	fmt.Fprintf(&b2, "%-4s %-100s %8s %8s\n", "step", "case", "traffic", "allowed")
	for i, s := range steps {
		want := tab.want(s.allowed)
		if i > 0 && slices.Equal(want, prev) != s.unchanged {
			t.Fatalf("step %d (%s): table equal to the previous step's: %v, want %v", i, s.name, !s.unchanged, s.unchanged)
		}
		prev = want
		s.change()
		took := tab.expect(t, fmt.Sprintf("step %d: %s", i, s.name), want, kpTimeout)
		n := 0
		for _, w := range want {
			if w {
				n++
			}
		}
		fmt.Fprintf(&b2, "%-4d %-100s %8s %4d/%d\n", i, s.name, took.Round(time.Millisecond), n, len(want))
	}
	t.Logf("truth tables checked (traffic: until one round of probes matched):\n%s", b2.String())
}
