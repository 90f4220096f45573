package e2e

import (
	"slices"
	"testing"

	"github.com/calico-aio/calico-aio/store/api"
)

// The pod annotation cni.projectcalico.org/allowedSourcePrefixes, read from
// a real kube-apiserver: a bad one fails ADD naming it and leaves nothing
// behind; a good one lands, host bits cleared, in the endpoint's
// allowSpoofedSourcePrefixes, and with FelixConfiguration
// workloadSourceSpoofing Any calico-node lets the pod send from an address
// in those prefixes (and still not from one outside them). On etcd and on
// the Kubernetes datastore (there the endpoint's prefixes are derived from
// the pod's annotation, and calico-node runs on the API).
func TestCNIK8sAllowedSourcePrefixes(t *testing.T) {
	t.Parallel()
	forEachDatastore(t, map[datastore]int{onEtcd: 47, onKube: 191}, testAllowedSourcePrefixes)
}

func testAllowedSourcePrefixes(t *testing.T, e *kubeCNIEnv) {
	const (
		annot   = "cni.projectcalico.org/allowedSourcePrefixes"
		spoofed = "10.137.99.9" // in the annotated prefix
		outside = "10.137.98.9" // in no prefix of the pod's
	)
	e.pool("default-v4", "10.137.0.0/24")
	l := e.conflist(e.kubeconfig, "", `{"type":"calico-ipam","ipv4_pools":["default-v4"]}`)
	e.create(t, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "shop"}})

	e.createPod(t, "shop", "badjson", "", nil, map[string]string{annot: `10.137.99.0/24`})
	e.createPod(t, "shop", "badcidr", "", nil, map[string]string{annot: `["10.137.99.0/24","10.137.99.0/33"]`})
	e.addFails(t, l, podRuntime(t, "shop", "badjson"), "pod shop/badjson", annot, "not a JSON list")
	e.addFails(t, l, podRuntime(t, "shop", "badcidr"), "pod shop/badcidr", annot, `"10.137.99.0/33" is not a CIDR`)

	e.startAgent("node1")
	e.createPod(t, "shop", "a", "", nil, map[string]string{annot: `["10.137.99.9/24"]`})
	e.createPod(t, "shop", "b", "", nil, nil)
	newPod := func(name string) pod {
		n := newNS(t)
		rt := podRuntimeIn(n, "shop", name)
		return pod{ns: n, ip: e.addOK(t, l, rt), rt: rt}
	}
	a, b := newPod("a"), newPod("b")
	if got := e.endpoint(t, "shop", "a").Spec.AllowSpoofedSourcePrefixes; !slices.Equal(got, []string{"10.137.99.0/24"}) {
		t.Fatalf("endpoint of shop/a: allowSpoofedSourcePrefixes %v, want [10.137.99.0/24]", got)
	}
	if got := e.endpoint(t, "shop", "b").Spec.AllowSpoofedSourcePrefixes; got != nil {
		t.Errorf("endpoint of shop/b (no annotation): allowSpoofedSourcePrefixes %v", got)
	}

	// a also owns both foreign addresses and the host routes them back to
	// it, so only the source check can stop its packets; b accepts any
	// source.
	hostIface := e.endpointOf(a).Spec.InterfaceName
	for _, addr := range []string{spoofed, outside} {
		mustNS(t, a.ns, "ip", "addr", "add", addr+"/32", "dev", "eth0")
		mustNS(t, e.host.ns, "ip", "route", "add", addr+"/32", "dev", hostIface)
	}
	e.apply(gnp("open", 10, "all()", []api.Rule{{Action: api.ActionAllow}}, nil))
	sink := listenUDP(t, b.ns, hostPort(b.ip, 9000))
	expectTraffic(t, "workloadSourceSpoofing Disabled (default): the annotation grants nothing",
		allow("udp from a's address", udpProbe(a.ns, a.ip, sink)),
		deny("udp from the annotated prefix", udpProbe(a.ns, spoofed, sink)))

	e.felixDefault(func(s *api.FelixConfigurationSpec) { s.WorkloadSourceSpoofing = "Any" })
	expectTraffic(t, "workloadSourceSpoofing Any: the annotated prefix is admitted",
		allow("udp from the annotated prefix", udpProbe(a.ns, spoofed, sink)),
		allow("udp from a's address", udpProbe(a.ns, a.ip, sink)),
		deny("udp from outside the annotated prefix", udpProbe(a.ns, outside, sink)))

	for _, p := range []pod{a, b} {
		if err := e.del(l, p.rt); err != nil {
			t.Errorf("DEL %s: %v", p.rt.ContainerID, err)
		}
	}
	e.assertClean()
}
