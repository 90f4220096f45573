package cni

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/calico-aio/calico-aio/store/kdd/derive"
)

// Orchestrator names as Calico writes them.
const (
	OrchestratorCNI = "cni"
	OrchestratorK8s = "k8s"
)

// identity is who a pod is in the datastore and on the host.
type identity struct {
	orchestrator string
	namespace    string // WorkloadEndpoint namespace
	pod          string // k8s pod name ("" for plain CNI)
	containerID  string
	ifName       string
	endpoint     string // WorkloadEndpoint name
	// hostVeth is the preferred host interface name until ADD chooses
	// (see HostIface), then the chosen one.
	hostVeth string
}

// hostIface is the workload's request for its host interface name.
func (id identity) hostIface(claims ClaimsSource) HostIface {
	return HostIface{Preferred: id.hostVeth, Self: EndpointKey(id.namespace, id.endpoint), LoadClaims: claims}
}

// newIdentity derives names the way Calico does: plain CNI pods are
// <node>-cni-<containerID>-<ifname> in namespace default, host veth
// "cali"+containerID[:11]; Kubernetes pods are <node>-k8s-<pod>-<ifname> in
// the pod's namespace, host veth "cali"+sha1("<ns>.<pod>")[:11]. The host
// veth is the first choice; HostIface decides the name taken.
func newIdentity(node, containerID, ifName string, a Args) identity {
	id := identity{containerID: containerID, ifName: ifName}
	if a.PodName != "" && a.PodNamespace != "" {
		id.orchestrator = OrchestratorK8s
		id.namespace, id.pod = a.PodNamespace, a.PodName
		id.endpoint = derive.WorkloadEndpointName(node, a.PodName, ifName)
		id.hostVeth = derive.HostVethName(a.PodNamespace, a.PodName)
		return id
	}
	id.orchestrator = OrchestratorCNI
	id.namespace = "default"
	id.endpoint = derive.EndpointName(node, "cni", containerID, ifName)
	short := containerID
	if ifName != "eth0" {
		// A second interface of the same container needs its own name.
		sum := sha1.Sum([]byte(containerID + "." + ifName))
		short = hex.EncodeToString(sum[:])
	}
	if len(short) > 11 {
		short = short[:11]
	}
	id.hostVeth = "cali" + short
	return id
}
