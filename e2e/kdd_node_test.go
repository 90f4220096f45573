package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/calico-aio/calico-aio/felix/rules"
	"github.com/calico-aio/calico-aio/k8s/controller"
	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// calico-node on the Kubernetes datastore: a real kube-apiserver with
// Calico's CRDs and no etcd of ours in the agent's configuration
// (DATASTORE_TYPE=kubernetes, KUBECONFIG); pods are wired by the test as
// the CNI plugin would (veth, addresses, the pod's Calico annotations).

// kddEnv is a Kubernetes-datastore cluster whose first node is e's host.
func kddEnv(t *testing.T, index int) *kubeCNIEnv {
	e := newKubeCNIEnv(t, index)
	e.api.InstallCRDs(t, kddCRDs)
	return e
}

// kddNode creates the Kubernetes Node name.
func (e *kubeCNIEnv) kddNode(t testing.TB, name string) {
	t.Helper()
	e.create(t, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name}})
}

// startKDDAgent runs calico-node for node in namespace n on the
// Kubernetes datastore, reaching the API through kubeconfig.
func (e *kubeCNIEnv) startKDDAgent(t testing.TB, n ns.NetNS, node, kubeconfig, stateDir string, extra ...string) *agentProc {
	t.Helper()
	a := e.launchKDDAgent(t, n, node, kubeconfig, stateDir, extra...)
	a.waitReady()
	return a
}

// launchKDDAgent is startKDDAgent without waiting for readiness.
func (e *kubeCNIEnv) launchKDDAgent(t testing.TB, n ns.NetNS, node, kubeconfig, stateDir string, extra ...string) *agentProc {
	t.Helper()
	env := []string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + kubeconfig, "NO_DEFAULT_POOLS=true"}
	return launchAgentWith(t, n, node, stateDir, env, append([]string{"--bgp=false"}, extra...)...)
}

// getJSON GETs an API object.
func (e *kubeCNIEnv) getJSON(t testing.TB, path string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.do(t, http.MethodGet, path, nil, http.StatusOK), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// kddPod creates pod name (labels) bound to node1 in namespace and wires
// it as Calico's CNI plugin would: a veth whose host side is Calico's
// name for the pod, eth0 with addr/32 and the default route via
// 169.254.1.1 in a new namespace, then the pod status patch with Calico's
// annotations. It returns the pod's namespace.
func (e *kubeCNIEnv) kddPod(t testing.TB, namespace, name, addr string, labels map[string]string) ns.NetNS {
	t.Helper()
	e.createPodWith(t, namespace, name, "", labels, nil, nil)
	p := newNS(t)
	host := derive.HostVethName(namespace, name)
	mustNS(t, e.host.ns, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", nsName(p))
	t.Cleanup(func() { _, _ = inNS(e.host.ns, "ip", "link", "del", host) })
	mustNS(t, e.host.ns, "ip", "link", "set", host, "address", "ee:ee:ee:ee:ee:ee", "up")
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"link", "set", "eth0", "up"}, {"addr", "add", addr + "/32", "dev", "eth0"},
		{"route", "add", "169.254.1.1", "dev", "eth0", "scope", "link"}, {"route", "add", "default", "via", "169.254.1.1", "dev", "eth0"}} {
		mustNS(t, p, "ip", args...)
	}
	patch, err := derive.AddPatch(strings.Repeat("c", 64), []netip.Prefix{netip.MustParsePrefix(addr + "/32")})
	if err != nil {
		t.Fatal(err)
	}
	e.do(t, http.MethodPatch, "/api/v1/namespaces/"+namespace+"/pods/"+name+"/status", patch, http.StatusOK)
	return p
}

// policyChains is the host's filter table and a test of whether it has
// the ingress chain of the Calico policy name in namespace. The dump may
// fail while the agent writes the table (nf_tables): callers retry.
func (e *kubeCNIEnv) policyChains() (has func(namespace, name string) bool, err error) {
	out, err := inNS(e.host.ns, "iptables-save", "-t", "filter")
	return func(namespace, name string) bool {
		chain := rules.PolicyChainName(rules.DirIngress, rules.PolicyKey{Namespace: namespace, Name: name})
		return strings.Contains(out, ":"+chain+" ")
	}, err
}

// TestKDDNode runs calico-node on the Kubernetes datastore: it starts,
// registers on its Kubernetes Node (annotations, NetworkUnavailable
// False/CalicoIsUp) and becomes ready; a pod's route follows the pod; a
// Kubernetes NetworkPolicy, read directly from the API, is enforced with
// real TCP traffic as knp.default.<name>; after an API server restart the
// agent's watches carry on: a new policy is enforced and a deleted one
// withdrawn; a Calico policy's services match follows the Service's
// EndpointSlices, read directly from the API.
func TestKDDNode(t *testing.T) {
	e := kddEnv(t, 171)
	e.kddNode(t, "node1")
	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	e.startKDDAgent(t, e.host.ns, "node1", e.kubeconfig, e.state)

	n := e.getJSON(t, "/api/v1/nodes/node1")
	if ip := n["metadata"].(map[string]any)["annotations"].(map[string]any)["projectcalico.org/IPv4Address"]; ip != e.host.hostIP+"/30" {
		t.Errorf("node annotation projectcalico.org/IPv4Address %v, want %s/30", ip, e.host.hostIP)
	}
	cond := ""
	for _, c := range n["status"].(map[string]any)["conditions"].([]any) {
		if c := c.(map[string]any); c["type"] == "NetworkUnavailable" {
			cond = fmt.Sprint(c["status"], " ", c["reason"])
		}
	}
	if cond != "False CalicoIsUp" {
		t.Errorf("NetworkUnavailable %q, want False CalicoIsUp", cond)
	}

	web := e.kddPod(t, "shop", "web", "10.171.0.2", map[string]string{"app": "web"})
	client := e.kddPod(t, "shop", "client", "10.171.0.3", map[string]string{"app": "client"})
	e.waitRoute("the web pod's route", "10.171.0.2", func(f []string) bool { return after(f, "dev") == derive.HostVethName("shop", "web") })
	e.waitRoute("the client pod's route", "10.171.0.3", func(f []string) bool { return after(f, "dev") == derive.HostVethName("shop", "client") })
	listenPeer(t, web, "10.171.0.2:8080")
	listenPeer(t, web, "10.171.0.2:9090")
	expectTraffic(t, "no policy", allow("client -> web:8080", tcpProbe(client, "10.171.0.2:8080")))

	// Only app=client to port 8080.
	e.create(t, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies", kpPolicy("web-8080", map[string]any{
		"podSelector": kpMatch("app", "web"),
		"ingress": []map[string]any{{"from": []map[string]any{{"podSelector": kpMatch("app", "client")}},
			"ports": []map[string]any{{"protocol": "TCP", "port": 8080}}}},
	}))
	eventually(t, 20*time.Second, "the chain of knp.default.web-8080", func() error {
		has, err := e.policyChains()
		if err != nil {
			return err
		}
		if !has("shop", "knp.default.web-8080") {
			return fmt.Errorf("no ingress chain for shop/knp.default.web-8080")
		}
		return nil
	})
	expectTraffic(t, "policy web-8080",
		allow("client -> web:8080", tcpProbe(client, "10.171.0.2:8080")),
		deny("client -> web:9090", tcpProbe(client, "10.171.0.2:9090")))

	e.api.Restart(t)
	e.create(t, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies", kpPolicy("web-none", map[string]any{
		"podSelector": kpMatch("app", "web"), "policyTypes": []string{"Ingress"},
	}))
	e.do(t, http.MethodDelete, "/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies/web-8080", nil, http.StatusOK)
	eventually(t, 30*time.Second, "web-8080 gone, web-none in place after the restart", func() error {
		has, err := e.policyChains()
		if err != nil {
			return err
		}
		if has("shop", "knp.default.web-8080") || !has("shop", "knp.default.web-none") {
			return fmt.Errorf("chains not as the policies are")
		}
		return nil
	})
	expectTraffic(t, "policy web-none", deny("client -> web:8080", tcpProbe(client, "10.171.0.2:8080")))

	// A Calico policy (a custom resource, as kubectl writes it) allowing
	// the endpoints of Service shop/clients: read from its EndpointSlices.
	e.create(t, "/apis/crd.projectcalico.org/v1/namespaces/shop/networkpolicies", map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "NetworkPolicy", "metadata": map[string]any{"name": "from-clients"},
		"spec": map[string]any{"tier": "default", "order": 10, "selector": "app == 'web'", "types": []string{"Ingress"},
			"ingress": []map[string]any{{"action": "Allow", "source": map[string]any{"services": map[string]any{"name": "clients", "namespace": "shop"}}}}},
	})
	ApplyEndpointSlice(t, e.api, "shop", "clients", ServiceSlice{Name: "clients-1", Addresses: []string{"10.171.0.3"}, Ports: []int{80}})
	expectTraffic(t, "client in Service clients", allow("client -> web:8080", tcpProbe(client, "10.171.0.2:8080")))
	DeleteEndpointSlice(t, e.api, "shop", "clients-1")
	expectTraffic(t, "Service clients without endpoints", deny("client -> web:8080", tcpProbe(client, "10.171.0.2:8080")))

	// No kubelet here: delete at once rather than mark for deletion.
	e.do(t, http.MethodDelete, "/api/v1/namespaces/shop/pods/web?gracePeriodSeconds=0", nil, http.StatusOK)
	eventually(t, 20*time.Second, "the deleted pod's route gone", func() error {
		if line := e.routeLine("10.171.0.2"); line != "" {
			return fmt.Errorf("route %q", line)
		}
		return nil
	})
	if e.routeLine("10.171.0.3") == "" {
		t.Errorf("the client pod lost its route")
	}
}

// TestKDDNodeLease runs two agents with the controllers on the
// Kubernetes datastore: one holds the controllers' Lease and copies no
// Kubernetes NetworkPolicy into a Calico one; when it stops, the other
// takes the Lease over.
func TestKDDNodeLease(t *testing.T) {
	e := kddEnv(t, 172)
	e.kddNode(t, "node1")
	e.kddNode(t, "node2")
	e.create(t, "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", kpPolicy("np", map[string]any{"podSelector": map[string]any{}}))
	h2 := newTestHost(t, 173)
	kc2 := e.writeKubeconfig(t, "https://"+relayIn(t, h2.ns, strings.TrimPrefix(e.api.URL, "https://")))
	a1 := e.startKDDAgent(t, e.host.ns, "node1", e.kubeconfig, e.state, "--kube-controllers-kubeconfig", e.kubeconfig)
	holder := func() string {
		code, body := e.api.Do(t, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/"+controller.LeaseNamespace+"/leases/"+controller.LeaseName, nil)
		if code != http.StatusOK {
			return ""
		}
		var l struct {
			Spec struct {
				HolderIdentity string `json:"holderIdentity"`
			} `json:"spec"`
		}
		_ = json.Unmarshal(body, &l)
		return l.Spec.HolderIdentity
	}
	want := func(id string) func() error {
		return func() error {
			if h := holder(); h != id {
				return fmt.Errorf("lease held by %q", h)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "node1 holds the lease", want("node1"))
	e.startKDDAgent(t, h2.ns, "node2", kc2, t.TempDir(), "--kube-controllers-kubeconfig", kc2)
	time.Sleep(3 * time.Second) // node2 retries every 2 s: it must not take a held lease
	if err := want("node1")(); err != nil {
		t.Fatalf("with both running: %v", err)
	}
	// The leader has made its first pass: it copied nothing.
	var crs struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/apis/crd.projectcalico.org/v1/networkpolicies", nil, http.StatusOK), &crs); err != nil {
		t.Fatal(err)
	}
	if len(crs.Items) != 0 {
		t.Errorf("the controller wrote Calico policies %v on the Kubernetes datastore", crs.Items)
	}
	a1.stop()
	eventually(t, 30*time.Second, "node2 takes the lease over", want("node2"))
}
