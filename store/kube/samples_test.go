package kube_test

import (
	"fmt"

	"github.com/calico-aio/calico-aio/store/model"
)

// sample is one object and its model JSON at version v.
type sample struct {
	key   model.Key
	value func(v int) []byte
}

func resourceSample(k model.Key, spec string) sample {
	ns := ""
	if k.Namespace != "" {
		ns = fmt.Sprintf(`"namespace":%q,`, k.Namespace)
	}
	return sample{k, func(v int) []byte {
		return fmt.Appendf(nil, `{"kind":%q,"apiVersion":"projectcalico.org/v3","metadata":{"name":%q,%s"creationTimestamp":"2026-11-21T08:30:00Z","labels":{"version":"v%d"}},"spec":%s}`,
			k.Kind, k.Name, ns, v, spec)
	}}
}

func blockSample(cidr, node string) sample {
	return sample{model.Key{Kind: model.KindIPAMBlock, Name: cidr}, func(v int) []byte {
		return fmt.Appendf(nil, `{"cidr":%q,"affinity":"host:%s","allocations":[0,null,null,null],"unallocated":[1,2,3],"attributes":[{"handle_id":"k8s-pod-network.c%d","secondary":{"namespace":"default","node":%q,"pod":"p","timestamp":"2026-11-21 08:30:00.000000000 +0000 UTC"}}],"sequenceNumber":%d,"sequenceNumberForAllocation":{"0":%d},"deleted":false}`,
			cidr, node, v, node, 1764000000000000000+v, v)
	}}
}

func affinitySample(node, cidr string) sample {
	return sample{model.Key{Kind: model.KindBlockAffinity, Node: node, Name: cidr}, func(v int) []byte {
		state := []string{"pending", "confirmed", "pendingDeletion"}[v%3]
		return fmt.Appendf(nil, `{"state":%q,"deleted":false}`, state)
	}}
}

func handleSample(id, cidr string) sample {
	return sample{model.Key{Kind: model.KindIPAMHandle, Name: id}, func(v int) []byte {
		return fmt.Appendf(nil, `{"block":{%q:%d},"deleted":false}`, cidr, v)
	}}
}

var ipamConfigSample = sample{model.Key{Kind: model.KindIPAMConfig, Name: "default"}, func(v int) []byte {
	return fmt.Appendf(nil, `{"strict_affinity":false,"auto_allocate_blocks":true,"maxBlocksPerHost":%d}`, v)
}}

// samples are one object of every class of kind stored, named with p and
// n so that subtests on one API server do not meet.
func samples(p string, n int) []sample {
	v4, v6 := fmt.Sprintf("10.65.%d.0/26", n), fmt.Sprintf("fd00:65:%d::/122", n)
	return []sample{
		resourceSample(model.Key{Kind: "IPPool", Name: p + "-pool"}, `{"cidr":"10.65.0.0/16","vxlanMode":"Never","ipipMode":"Never","natOutgoing":true,"blockSize":26,"nodeSelector":"all()","allowedUses":["Workload","Tunnel"],"assignmentMode":"Automatic"}`),
		resourceSample(model.Key{Kind: "NetworkPolicy", Namespace: "ns1", Name: p + "-allow-web"}, `{"tier":"default","order":100,"selector":"app == 'web'","types":["Ingress"],"ingress":[{"action":"Allow","protocol":"TCP","destination":{"ports":[80]}}]}`),
		blockSample(v4, p+"-node"),
		blockSample(v6, p+"-node"),
		affinitySample(p+"-node", v4),
		affinitySample(p+"-node", v6),
		handleSample("k8s-pod-network."+p+"C1", v4),
		kccSample(p),
	}
}

// kccSample is a KubeControllersConfiguration with a status, which its CRD
// keeps in a status subresource.
func kccSample(p string) sample {
	k := model.Key{Kind: "KubeControllersConfiguration", Name: p + "-kcc"}
	return sample{k, func(v int) []byte {
		return fmt.Appendf(nil, `{"kind":%q,"apiVersion":"projectcalico.org/v3","metadata":{"name":%q,"creationTimestamp":"2026-11-21T08:30:00Z"},"spec":{"controllers":{},"healthChecks":"Enabled"},"status":{"environmentVars":{"VERSION":"v%d"}}}`,
			k.Kind, k.Name, v)
	}}
}
