package storetest

import (
	"fmt"

	"github.com/calico-aio/calico-aio/store"
)

// sample is one object of a kind the conformance suite stores: its key and
// its model JSON at version v (each version a different value).
type sample struct {
	key   store.Key
	value func(v int) []byte
}

// resourceJSON is a projectcalico.org/v3 object of kind named by key, with
// a label carrying v.
func resourceJSON(k store.Key, spec string) func(int) []byte {
	ns := ""
	if k.Namespace != "" {
		ns = fmt.Sprintf(`"namespace":%q,`, k.Namespace)
	}
	return func(v int) []byte {
		return fmt.Appendf(nil, `{"kind":%q,"apiVersion":"projectcalico.org/v3","metadata":{"name":%q,%s"uid":"6c0e2a53-8d1e-4c55-9f57-1f3c7c2d6a%02d","creationTimestamp":"2026-11-21T08:30:00Z","labels":{"version":"v%d"}},"spec":%s}`,
			k.Kind, k.Name, ns, len(k.Name)%100, v, spec)
	}
}

func blockJSON(cidr, node string) func(int) []byte {
	return func(v int) []byte {
		return fmt.Appendf(nil, `{"cidr":%q,"affinity":"host:%s","allocations":[0,null,null,null],"unallocated":[1,2,3],"attributes":[{"handle_id":"k8s-pod-network.c%d","secondary":{"namespace":"default","node":%q,"pod":"p","timestamp":"2026-11-21 08:30:00.000000000 +0000 UTC"}}],"sequenceNumber":%d,"sequenceNumberForAllocation":{"0":%d},"deleted":false}`,
			cidr, node, v, node, v, v)
	}
}

func affinityJSON(v int) []byte {
	if v%2 == 1 {
		return []byte(`{"state":"pending","deleted":false}`)
	}
	return []byte(`{"state":"confirmed","deleted":false}`)
}

func handleJSON(cidr string) func(int) []byte {
	return func(v int) []byte { return fmt.Appendf(nil, `{"block":{%q:%d},"deleted":false}`, cidr, v) }
}

func ipamConfigJSON(v int) []byte {
	return fmt.Appendf(nil, `{"auto_allocate_blocks":true,"maxBlocksPerHost":%d}`, v)
}

// samples are objects of every kind class the contract names: a
// cluster-scoped resource, a namespaced one in two namespaces, and every
// IPAM kind (blocks and affinities of both families on two nodes).
func samples() []sample {
	pool := store.Key{Kind: "IPPool", Name: "pool-a"}
	np1 := store.Key{Kind: "NetworkPolicy", Namespace: "ns1", Name: "default.allow-web"}
	np2 := store.Key{Kind: "NetworkPolicy", Namespace: "ns2", Name: "default.allow-web"}
	npSpec := `{"tier":"default","order":100,"selector":"app == 'web'","types":["Ingress"],"ingress":[{"action":"Allow","protocol":"TCP","destination":{"ports":[80]}}]}`
	out := []sample{
		{pool, resourceJSON(pool, `{"cidr":"10.65.0.0/16","vxlanMode":"Never","ipipMode":"Never","natOutgoing":true,"blockSize":26,"nodeSelector":"all()","allowedUses":["Workload","Tunnel"],"assignmentMode":"Automatic"}`)},
		{np1, resourceJSON(np1, npSpec)},
		{np2, resourceJSON(np2, npSpec)},
		{store.Key{Kind: store.KindIPAMHandle, Name: "k8s-pod-network.c1"}, handleJSON("10.65.0.0/26")},
		{store.Key{Kind: store.KindIPAMConfig, Name: "default"}, ipamConfigJSON},
	}
	for _, b := range []struct{ node, cidr string }{
		{"node-a", "10.65.0.0/26"}, {"node-a", "fd00:65::/122"}, {"node-b", "10.65.0.64/26"},
	} {
		out = append(out,
			sample{store.Key{Kind: store.KindIPAMBlock, Name: b.cidr}, blockJSON(b.cidr, b.node)},
			sample{store.Key{Kind: store.KindBlockAffinity, Node: b.node, Name: b.cidr}, affinityJSON})
	}
	return out
}
