package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/calico-aio/calico-aio/k8s"
	"github.com/calico-aio/calico-aio/store/api"
)

// Kubernetes NetworkPolicy conformance with real traffic: namespaces and
// pods are created in a real kube-apiserver, the pods are wired by the CNI
// plugin on its Kubernetes path, calico-node runs the policy controller
// (NetworkPolicy -> knp.default.<name>) and enforces on the node, and after
// every API change the whole truth table of who reaches whom on which port
// is checked with TCP connections.

// kpTimeout bounds each wait: the controller reacts to watch events (its
// resync, the fallback, is a minute), then the agent programs the change.
const kpTimeout = 15 * time.Second

// kpPorts are the ports every pod listens on and every probe tries.
var kpPorts = []int{80, 81, 82, 83}

// kpPool is the pods' address range (the ipBlock case names it).
const kpPool = "10.160.0.0/24"

func kpNamespace(tb testing.TB, e *kubeCNIEnv, name string, labels map[string]string) {
	tb.Helper()
	e.create(tb, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": labels}})
}

// kpAddPod creates the pod in the API (bound to node1, with labels and
// named container ports) and then ADDs it the way the kubelet would, in a
// fresh network namespace.
func kpAddPod(tb testing.TB, e *kubeCNIEnv, l *libcni.NetworkConfigList, namespace, name, sa string,
	labels map[string]string, ports map[string]int) *kpPod {
	tb.Helper()
	var cports []map[string]any
	for n, p := range ports {
		cports = append(cports, map[string]any{"name": n, "containerPort": p})
	}
	e.createPodWith(tb, namespace, name, sa, labels, nil, cports)
	n := newNS(tb)
	rt := podRuntimeIn(n, namespace, name)
	res, err := e.add(l, rt)
	if err != nil {
		tb.Fatalf("ADD %s/%s: %v", namespace, name, err)
	}
	v4, _ := podAddrs(res)
	return &kpPod{namespace: namespace, name: name, http: ports["http"], net: pod{ns: n, ip: v4, rt: rt}}
}

// NetworkPolicy objects as the API takes them.

func kpPolicy(name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": name}, "spec": spec}
}

// kpMatch is a label selector with matchLabels k1: v1, k2: v2...; no pairs is {}.
func kpMatch(kv ...string) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return map[string]any{"matchLabels": m}
}

// kpPolicies tracks the NetworkPolicies in the API (as the API returned
// them, defaults included) to check that the datastore holds exactly their
// translations.
type kpPolicies struct {
	e    *kubeCNIEnv
	have map[string]k8s.NetworkPolicy // namespace/name
	gone map[string]bool              // namespace/name of the deleted ones
}

func kpPolicyPath(namespace string) string {
	return "/apis/networking.k8s.io/v1/namespaces/" + namespace + "/networkpolicies"
}

// create POSTs a policy into namespace.
func (s *kpPolicies) create(tb testing.TB, namespace string, obj map[string]any) {
	tb.Helper()
	s.keep(tb, s.e.do(tb, http.MethodPost, kpPolicyPath(namespace), obj, http.StatusCreated))
}

// update PUTs a new version of a policy (no resourceVersion: unconditional).
func (s *kpPolicies) update(tb testing.TB, namespace string, obj map[string]any) {
	tb.Helper()
	name := obj["metadata"].(map[string]any)["name"].(string)
	s.keep(tb, s.e.do(tb, http.MethodPut, kpPolicyPath(namespace)+"/"+name, obj, http.StatusOK))
}

func (s *kpPolicies) delete(tb testing.TB, namespace, name string) {
	tb.Helper()
	s.e.do(tb, http.MethodDelete, kpPolicyPath(namespace)+"/"+name, nil, http.StatusOK)
	delete(s.have, namespace+"/"+name)
	s.gone[namespace+"/"+name] = true
}

func (s *kpPolicies) keep(tb testing.TB, body []byte) {
	tb.Helper()
	var np k8s.NetworkPolicy
	if err := json.Unmarshal(body, &np); err != nil {
		tb.Fatalf("decoding %s: %v", body, err)
	}
	s.have[np.Metadata.Namespace+"/"+np.Metadata.Name] = np
	delete(s.gone, np.Metadata.Namespace+"/"+np.Metadata.Name)
}

// inDatastore is nil when the datastore holds exactly the translations of
// the tracked policies as knp.default.* NetworkPolicies.
func (s *kpPolicies) inDatastore() error {
	rs, _, err := s.e.cl.ListResources(context.Background(), kindOf("NetworkPolicy"), "")
	if err != nil {
		return err
	}
	got := map[string]*api.NetworkPolicy{}
	for _, r := range rs {
		if p := r.(*api.NetworkPolicy); strings.HasPrefix(p.Metadata.Name, k8s.NetworkPolicyPrefix) {
			got[p.Metadata.Namespace+"/"+p.Metadata.Name] = p
		}
	}
	for id, np := range s.have {
		want, err := k8s.NetworkPolicyToCalico(np)
		if err != nil {
			return fmt.Errorf("translating %s: %v", id, err)
		}
		want.Default()
		key := want.Metadata.Namespace + "/" + want.Metadata.Name
		g := got[key]
		if g == nil {
			return fmt.Errorf("%s not in the datastore", key)
		}
		// Compared as JSON: a Port read back from JSON remembers that it
		// was quoted, one built in memory does not.
		gj, _ := json.Marshal(g.Spec)
		wj, _ := json.Marshal(want.Spec)
		if string(gj) != string(wj) {
			return fmt.Errorf("%s: spec %s, want %s", key, gj, wj)
		}
		delete(got, key)
	}
	for key := range got {
		return fmt.Errorf("%s still in the datastore", key)
	}
	return nil
}

// TestK8sNetworkPolicyConformance: namespaces x, y and z (labelled ns=<name>)
// with pods a and b each (labelled pod=a, pod=b); every pod listens on TCP
// 80-83, and its container port "http" is 80 for the a pods and 81 for the
// b pods. Each step changes NetworkPolicies in the API, waits until the
// datastore holds exactly their translations, and checks the whole table
// (6 pods x 5 peers x 4 ports) with real connections. No step's table is
// the previous one's, so every step's expectations can fail.
//
// Kubernetes semantics checked: a pod selected by any policy for a
// direction is isolated for it, and then gets the union of the policies'
// rules; no rules is deny; an empty rule ({}) allows everything; a peer's
// podSelector without namespaceSelector means the policy's namespace, with
// one (even {}) the selected namespaces, both in one peer AND, separate peers
// OR; ipBlock matches pod addresses too (as in Calico) minus except; named
// ports resolve per pod, in ingress and egress; endPort is inclusive; a
// port's protocol counts (UDP allows no TCP); policyTypes [Egress] leaves
// ingress alone, while without policyTypes the API defaults to Ingress (plus
// Egress with egress rules); replies of allowed connections pass an
// isolated pod's other direction.
//
// It runs on both datastores, in parallel. On etcd the controller copies
// each NetworkPolicy into knp.default.<name> and each step first waits
// until the datastore holds exactly the copies; on Kubernetes (the CNI
// plugin and calico-node on Calico's CRDs, no etcd of ours) the agent
// reads the NetworkPolicies directly: each step first waits until the
// agent's dataplane has the chains of exactly the policies in the API, and
// no knp.default.* custom resource may ever be written.
func TestK8sNetworkPolicyConformance(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		ds   datastore
		host int
	}{{onEtcd, 60}, {onKube, 186}} {
		t.Run(string(v.ds), func(t *testing.T) {
			t.Parallel()
			testK8sNetworkPolicyConformance(t, newKubeCNIEnvOn(t, v.host, v.ds))
		})
	}
}

func testK8sNetworkPolicyConformance(t *testing.T, e *kubeCNIEnv) {
	e.pool("k8s", kpPool)
	l := e.conflist(e.kubeconfig, "", `{"type":"calico-ipam","ipv4_pools":["k8s"]}`)
	tab := &kpTable{ports: kpPorts}
	for _, n := range []string{"x", "y", "z"} {
		kpNamespace(t, e, n, map[string]string{"ns": n})
		for _, name := range []string{"a", "b"} {
			httpPort := map[string]int{"a": 80, "b": 81}[name]
			p := kpAddPod(t, e, l, n, name, "", map[string]string{"pod": name}, map[string]int{"http": httpPort})
			for _, port := range kpPorts {
				listenPeer(t, p.net.ns, fmt.Sprintf(":%d", port))
			}
			tab.pods = append(tab.pods, p)
		}
	}
	if w := e.endpoint(t, "x", "b"); w.Metadata.Labels["pod"] != "b" || !slices.Equal(w.Spec.Profiles, []string{"kns.x"}) ||
		len(w.Spec.Ports) != 1 || w.Spec.Ports[0].Name != "http" || w.Spec.Ports[0].Port != 81 {
		t.Fatalf("endpoint of x/b: labels %v profiles %v ports %+v", w.Metadata.Labels, w.Spec.Profiles, w.Spec.Ports)
	}
	if lb := e.profile(t, "kns.y").Spec.LabelsToApply; lb["pcns.ns"] != "y" {
		t.Fatalf("kns.y labels %v", lb)
	}
	if e.ds == onKube {
		e.kddNode(t, "node1")
		e.startKDDAgent(t, e.host.ns, "node1", e.kubeconfig, e.state, "--kube-controllers-kubeconfig", e.kubeconfig)
	} else {
		e.startAgent("node1", "--kube-controllers-kubeconfig", e.kubeconfig)
	}

	pols := &kpPolicies{e: e, have: map[string]k8s.NetworkPolicy{}, gone: map[string]bool{}}
	is := func(p *kpPod, id string) bool { return p.String() == id }
	var ya string // y/a's address, for the ipBlock except
	for _, p := range tab.pods {
		if is(p, "y/a") {
			ya = p.net.ip
		}
	}
	denyAllIngress := kpPolicy("deny-all", map[string]any{"podSelector": kpMatch(), "policyTypes": []string{"Ingress"}})
	allowFromNS := func(ns string) map[string]any {
		return kpPolicy("allow-from-ns", map[string]any{"podSelector": kpMatch(),
			"ingress": []any{map[string]any{"from": []any{map[string]any{"namespaceSelector": kpMatch("ns", ns)}}}}})
	}
	egress80 := func(types ...string) map[string]any {
		spec := map[string]any{"podSelector": kpMatch("pod", "a"),
			"egress": []any{map[string]any{"ports": []any{map[string]any{"port": 80}}}}}
		if len(types) > 0 {
			spec["policyTypes"] = types
		}
		return kpPolicy("egress-80", spec)
	}

	steps := []struct {
		name    string
		change  func()
		allowed func(from, to *kpPod, port int) bool
	}{
		{"no policy: everything allowed", func() {},
			func(from, to *kpPod, port int) bool { return true }},
		{"deny all ingress in x (podSelector {}, no rules)", func() { pols.create(t, "x", denyAllIngress) },
			func(from, to *kpPod, port int) bool { return to.namespace != "x" }},
		{"plus allow everything to x/a (ingress [{}])", func() {
			pols.create(t, "x", kpPolicy("allow-all-to-a", map[string]any{"podSelector": kpMatch("pod", "a"), "ingress": []any{map[string]any{}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || is(to, "x/a") }},
		{"allow from namespace ns=y (namespaceSelector)", func() {
			pols.delete(t, "x", "allow-all-to-a")
			pols.create(t, "x", allowFromNS("y"))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || from.namespace == "y" }},
		{"update: namespaceSelector ns=y -> ns=z", func() { pols.update(t, "x", allowFromNS("z")) },
			func(from, to *kpPod, port int) bool { return to.namespace != "x" || from.namespace == "z" }},
		{"allow from pod=a AND ns=y (one peer)", func() {
			pols.delete(t, "x", "allow-from-ns")
			pols.create(t, "x", kpPolicy("peer-and", map[string]any{"podSelector": kpMatch(), "ingress": []any{map[string]any{
				"from": []any{map[string]any{"podSelector": kpMatch("pod", "a"), "namespaceSelector": kpMatch("ns", "y")}}}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || is(from, "y/a") }},
		{"allow from pod=a (in x) OR ns=y (two peers)", func() {
			pols.delete(t, "x", "peer-and")
			pols.create(t, "x", kpPolicy("peer-or", map[string]any{"podSelector": kpMatch(), "ingress": []any{map[string]any{
				"from": []any{map[string]any{"podSelector": kpMatch("pod", "a")}, map[string]any{"namespaceSelector": kpMatch("ns", "y")}}}}}))
		}, func(from, to *kpPod, port int) bool {
			return to.namespace != "x" || from.namespace == "y" || is(from, "x/a")
		}},
		{"allow from pod in (b) of every namespace (namespaceSelector {}, matchExpressions)", func() {
			pols.delete(t, "x", "peer-or")
			pols.create(t, "x", kpPolicy("any-ns-b", map[string]any{"podSelector": kpMatch(), "ingress": []any{map[string]any{
				"from": []any{map[string]any{"namespaceSelector": kpMatch(), "podSelector": map[string]any{
					"matchExpressions": []any{map[string]any{"key": "pod", "operator": "In", "values": []string{"b"}}}}}}}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || from.name == "b" }},
		{"allow to x/a from pod=b of its own namespace (podSelector only)", func() {
			pols.delete(t, "x", "any-ns-b")
			pols.create(t, "x", kpPolicy("same-ns-pod", map[string]any{"podSelector": kpMatch("pod", "a"), "ingress": []any{map[string]any{
				"from": []any{map[string]any{"podSelector": kpMatch("pod", "b")}}}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || (is(to, "x/a") && is(from, "x/b")) }},
		{"allow from ipBlock " + kpPool + " except y/a", func() {
			pols.delete(t, "x", "same-ns-pod")
			pols.create(t, "x", kpPolicy("ip-block", map[string]any{"podSelector": kpMatch(), "ingress": []any{map[string]any{
				"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": kpPool, "except": []string{ya + "/32"}}}}}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || !is(from, "y/a") }},
		{`allow to x on the named port "http" (80 on a, 81 on b)`, func() {
			pols.delete(t, "x", "ip-block")
			pols.create(t, "x", kpPolicy("named-port", map[string]any{"podSelector": kpMatch(), "ingress": []any{map[string]any{
				"ports": []any{map[string]any{"port": "http"}}}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || port == to.http }},
		{"allow to x on ports 81-82 (endPort)", func() {
			pols.delete(t, "x", "named-port")
			pols.create(t, "x", kpPolicy("port-range", map[string]any{"podSelector": kpMatch(), "ingress": []any{map[string]any{
				"ports": []any{map[string]any{"protocol": "TCP", "port": 81, "endPort": 82}}}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" || port == 81 || port == 82 }},
		{"allow to x on UDP 80-83 only: no TCP", func() {
			pols.delete(t, "x", "port-range")
			pols.create(t, "x", kpPolicy("udp-only", map[string]any{"podSelector": kpMatch(), "ingress": []any{map[string]any{
				"ports": []any{map[string]any{"protocol": "UDP", "port": 80, "endPort": 83}}}}}))
		}, func(from, to *kpPod, port int) bool { return to.namespace != "x" }},
		{"egress-only (policyTypes [Egress]): x/a may send to port 80 only", func() {
			pols.delete(t, "x", "udp-only")
			pols.delete(t, "x", "deny-all")
			pols.create(t, "x", egress80("Egress"))
		}, func(from, to *kpPod, port int) bool { return !is(from, "x/a") || port == 80 }},
		{"update: no policyTypes (defaults to Ingress+Egress): x/a's ingress denied too", func() {
			pols.update(t, "x", egress80())
		}, func(from, to *kpPod, port int) bool { return (!is(from, "x/a") || port == 80) && !is(to, "x/a") }},
		{`egress from x/a to pod=b (its namespace) on the named port "http" (x/b's 81)`, func() {
			pols.delete(t, "x", "egress-80")
			pols.create(t, "x", kpPolicy("egress-named", map[string]any{"podSelector": kpMatch("pod", "a"), "policyTypes": []string{"Egress"},
				"egress": []any{map[string]any{"to": []any{map[string]any{"podSelector": kpMatch("pod", "b")}},
					"ports": []any{map[string]any{"port": "http"}}}}}))
		}, func(from, to *kpPod, port int) bool { return !is(from, "x/a") || (is(to, "x/b") && port == 81) }},
		{"egress-only in y: y may send to ns=z only, ingress to y unaffected", func() {
			pols.delete(t, "x", "egress-named")
			pols.create(t, "y", kpPolicy("egress-to-z", map[string]any{"podSelector": kpMatch(), "policyTypes": []string{"Egress"},
				"egress": []any{map[string]any{"to": []any{map[string]any{"namespaceSelector": kpMatch("ns", "z")}}}}}))
		}, func(from, to *kpPod, port int) bool { return from.namespace != "y" || to.namespace == "z" }},
		{"delete: everything allowed again", func() { pols.delete(t, "y", "egress-to-z") },
			func(from, to *kpPod, port int) bool { return true }},
	}

	var prev []bool
	type timing struct {
		name                  string
		controller, traffic   time.Duration
		allowed, denied, cell int
	}
	var times []timing
	for i, s := range steps {
		want := tab.want(s.allowed)
		if slices.Equal(want, prev) {
			t.Fatalf("step %d (%s): its table is the previous step's, so it would pass unchanged", i, s.name)
		}
		prev = want
		what := fmt.Sprintf("step %d: %s", i, s.name)
		start := time.Now()
		s.change()
		var ctl time.Duration
		if i > 0 {
			eventually(t, kpTimeout, what+": "+pols.syncedWhat(), pols.synced)
			ctl = time.Since(start)
		}
		traffic := tab.expect(t, what, want, kpTimeout)
		if e.ds == onKube {
			pols.noCopies(t, what)
		}
		n := 0
		for _, w := range want {
			if w {
				n++
			}
		}
		times = append(times, timing{s.name, ctl, traffic, n, len(want) - n, len(want)})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-4s %-82s %10s %8s %8s\n", "step", "case", pols.syncedColumn(), "traffic", "allowed")
	for i, tm := range times {
		fmt.Fprintf(&b, "%-4d %-82s %10s %8s %4d/%d\n", i, tm.name, tm.controller.Round(time.Millisecond),
			tm.traffic.Round(time.Millisecond), tm.allowed, tm.cell)
	}
	t.Logf("truth tables checked (%s: until %s, polled every 100 ms; "+
		"traffic: until one round of probes matched the table, a round with denied probes lasting the %s probe timeout):\n%s",
		pols.syncedColumn(), pols.syncedWhat(), probeTimeout, b.String())
}
